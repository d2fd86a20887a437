#!/usr/bin/env bash
# Exit codes and messages of the dispatcher: 0 ok, 2 usage errors, "streamtune: error: ..." on stderr.
set -u
BIN="$1"
fail=0
check() {  # check NAME EXPECTED_RC PATTERN -- ARGS...
  local name="$1" want_rc="$2" pattern="$3"; shift 4
  local out rc
  out=$("$BIN" "$@" 2>&1); rc=$?
  if [[ $rc -ne $want_rc ]]; then echo "FAIL $name: rc $rc, want $want_rc: $out"; fail=1; return; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then echo "FAIL $name: output lacks /$pattern/: $out"; fail=1; return; fi
  echo "ok   $name"
}
check no-args 2 '^usage: streamtune <command>' --
check version 0 '^streamtune [0-9]+\.[0-9]+\.[0-9]+$' -- --version
check version-backends 0 '^backends: cpu' -- --version
check help 0 'init-model +write a randomly' -- --help
check unknown-command 2 "^streamtune: error: unknown command 'trian' \(did you mean 'train'\?\)" -- trian
check unknown-top-option 2 "^streamtune: error: unknown option '--verbose'" -- --verbose
check train-help 0 '^usage: streamtune train CONFIG.yaml' -- train --help
check train-no-config 2 '^streamtune: error: missing CONFIG.yaml' -- train
check train-two-configs 2 "unexpected argument 'b.yaml'" -- train a.yaml b.yaml
check init-help 0 '^usage: streamtune init-model' -- init-model -h
check help-cmd 0 '^usage: streamtune init-model' -- help init-model
check init-no-out 2 '^streamtune: error: missing --out DIR' -- init-model --preset tiny-llama
check init-both 2 'exactly one of --preset NAME or --config FILE' -- init-model --preset tiny-llama --config c.json --out x
check init-bad-flag 2 "unknown option '--sed' \(did you mean '--seed'\?\)" -- init-model --preset tiny-llama --out x --sed 3
check init-bad-seed 2 "option '--seed': expected a non-negative integer" -- init-model --preset tiny-llama --out x --seed -3
check init-bad-dtype 2 '^streamtune: error: --dtype' -- init-model --preset tiny-llama --out x --dtype int4
check init-bad-preset 2 "unknown model preset 'gpt-9'" -- init-model --preset gpt-9 --out x
check init-list 0 '^qwen2.5-14b ' -- init-model --list-presets
check init-missing-config 1 '^streamtune: error: .*nope.json' -- init-model --config /nonexistent/nope.json --out /tmp/st_never_written
# Every command in the table answers --help with its usage and exit 0.
for cmd in $("$BIN" --help | awk '/^commands:/{c=1; next} c && NF {print $1}'); do
  check "help-$cmd" 0 "usage: streamtune $cmd" -- "$cmd" --help
done
exit $fail
