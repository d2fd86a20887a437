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

# make_pair_fixture FILE N: N preference pairs "what is i?" -> chosen "it is i" / rejected "it is
# not i", in axolotl's chat_template form (the preference tests).
make_pair_fixture() {
  local file=$1 n=$2
  for i in $(seq 1 "$n"); do
    printf '%s\n' '{"messages": [{"role": "user", "content": "what is '"$i"'?"}], "chosen": {"role": "assistant", "content": "it is '"$i"'"}, "rejected": {"role": "assistant", "content": "it is not '"$i"'"}}'
  done >"$file"
}

# expect_refusal NAME PATTERN -- ARGS...: `BIN ARGS` run in $T must exit non-zero with PATTERN
# (an extended regex) on stderr; prints ok / FAIL and sets fail=1 on a miss.
expect_refusal() {
  local name="$1" pattern="$2"; shift 3
  local err rc
  err=$(cd "$T" && "$BIN" "$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc -ne 0 ]] && grep -qE -- "$pattern" <<<"$err"; then echo "ok   $name"
  else echo "FAIL $name: rc $rc: $err"; fail=1; fi
}
