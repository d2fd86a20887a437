# Sourced by the CLI tests that train on chat data (evaluate, trained_template). Not a test itself.

# make_chat_fixture BIN DIR N: DIR/model (tiny-llama, random, with the 300-token fixture tokenizer
# that has <|im_start|> / <|im_end|> and no chat template) and DIR/sg.jsonl, N ShareGPT records
# "what is i?" -> "it is i".
make_chat_fixture() {
  local bin=$1 dir=$2 n=$3
  "$bin" init-model --preset tiny-llama --out "$dir/model" --seed 1 >/dev/null || return 1
  cp "$(dirname "${BASH_SOURCE[0]}")/../fixtures/gguf/tiny_tokenizer.json" "$dir/model/tokenizer.json" || return 1
  for i in $(seq 1 "$n"); do
    printf '%s\n' '{"conversations": [{"from": "human", "value": "what is '"$i"'?"}, {"from": "gpt", "value": "it is '"$i"'"}]}'
  done >"$dir/sg.jsonl"
}
