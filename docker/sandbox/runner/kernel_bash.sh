# shellcheck shell=bash
# Switchyard bash kernel: one shell kept across a session's cells (its cwd, variables, functions, aliases, options).
#
# The runner starts `bash --norc --noprofile --noediting +o history +H -i` with its command input (fd 0) a pipe from
# the runner, fds 1 and 2 the cell output and fd 4 the reply pipe, and sources this file as the first command. The
# shell is interactive for one reason: SIGINT (the runner's interrupt) then aborts the whole command line being run
# (the cell, loops and functions included) and the shell reads its next line with its state intact, as at a
# terminal. For each cell the runner sends
#
#   \__sw_begin $'<start>' $'<end>' && { [\builtin export K=$'v' ...;] \builtin eval -- $'<code>' </dev/null; \__sw_end $?; }
#
# `__sw_begin` writes the start token, then reads the runner's go-ahead line: `\builtin : go`, or `\builtin : stop`
# when an interrupt was asked for first (the cell then does not run); the runner sends it once it saw the token, so
# no interrupt arrives while the shell is still getting into the cell (where bash may drop it), and follows it with
# `\__sw_report`. The cell runs at the top level (so `declare` makes globals), with stdin /dev/null. `__sw_report`
# is read whether the cell finished or was interrupted; it writes the end token to stdout and stderr and replies
#   {"count": int, "ok": bool, "exitCode": int, "interrupted": bool, "result": null, "error": null|{...}}
# `exitCode` is the status of the cell's last command (130 when interrupted).
#
# `exit [N]` ends the cell, not the shell: `exit` is a function that, in the shell itself (a subshell's `exit` is the
# builtin's), records N and sends the shell a SIGINT, which aborts the cell's whole command line as an interrupt
# does (loops and functions included) and keeps the state; the report then gives N as `exitCode` and no interrupt.
# A `set -e` failure does the same through an ERR trap (errtrace on, so failures inside functions reach it; `set -e`
# is switched off to get out and on again after the report). What bypasses these (`builtin exit`, `exec cmd`,
# `kill -KILL $$`, a cell's own ERR trap under `set -e`) still ends the shell: the runner then reports the state lost.
# What an interactive shell prints by itself stays: "[1] <pid>" when a job starts in the background, and a newline
# on stderr when a cell is interrupted.

PS1='' PS2='' PS0=''
unset PROMPT_COMMAND HISTFILE MAILPATH MAIL
# The reply pipe out of the way of the cell's own `exec 4>...`, and the output pipes kept for the tokens, so they
# reach the runner even when a cell redirects its stdout and stderr for good (`exec >log 2>&1`).
exec {__sw_reply}>&4 4>&- {__sw_out}>&1 {__sw_err}>&2
__sw_count=0
__sw_ok=''
__sw_status=0
__sw_end_token=''
__sw_exited=''     # the status a cell's `exit` (or `set -e` failure) ended it with
__sw_errexit=''    # `set -e` was on when a failure ended the cell: on again after the report
__sw_int_trap=''   # the cell's own SIGINT trap, set aside while `exit` gets out
__sw_stderr=''     # the cell's stderr, set aside while `exit` gets out (the abort prints a newline there)

# Ends the cell with `status`, keeping the shell: the SIGINT aborts the command line now (the shell's own handler,
# not a trap of the cell's, which is set back by the report).
__sw_leave() {
  __sw_exited=$(($1 & 255))
  __sw_int_trap=$(builtin trap -p INT)
  builtin trap - INT
  # `exec` itself (`builtin exec` would undo the redirections after it), unless the cell made it a function.
  if ! builtin declare -F exec >/dev/null; then
    exec {__sw_stderr}>&2 2>/dev/null
  fi
  builtin kill -INT "$$"
  # Bash acts on the signal before its next command: within a trap (`set -e`), it must be one of the trap's.
  builtin :
}

exit() {
  local status=$?
  if [[ $BASHPID != "$$" ]]; then builtin exit "$@"; fi
  # The builtin's own reading of the arguments (errors included), in a subshell it ends.
  if (($# > 0)); then
    status=0
    (builtin exit "$@") || status=$?
  fi
  __sw_leave "$status"
}

__sw_on_err() {
  local status=$?
  [[ $- == *e* && $BASHPID == "$$" ]] || return "$status"
  builtin set +e
  __sw_errexit=1
  __sw_leave "$status"
}
builtin trap '__sw_on_err' ERR
builtin set -o errtrace

__sw_begin() {
  __sw_count=$((__sw_count + 1))
  __sw_ok=''
  __sw_end_token=$2
  builtin printf '%s' "$1" >&"${__sw_out}"
  builtin printf '%s' "$1" >&"${__sw_err}"
  local go=''
  IFS= builtin read -r go || go=''
  [[ $go == '\builtin : go' ]]
}

__sw_end() {
  __sw_status=$1
  __sw_ok=1
}

__sw_report() {
  local status=130 ok=false interrupted=true error='{"name":"Interrupted","message":"the cell was interrupted"}'
  if [[ -n ${__sw_stderr-} ]]; then
    exec 2>&"${__sw_stderr}" {__sw_stderr}>&-
    __sw_stderr=''
  fi
  if [[ -n ${__sw_int_trap-} ]]; then
    builtin eval -- "${__sw_int_trap}"
    __sw_int_trap=''
  fi
  if [[ -n ${__sw_exited-} ]]; then
    status=${__sw_exited}
    interrupted=false
    error=null
    if ((status == 0)); then ok=true; fi
  elif [[ -n ${__sw_ok-} ]]; then
    status=${__sw_status-0}
    interrupted=false
    error=null
    if ((status == 0)); then ok=true; fi
  fi
  builtin printf '%s' "${__sw_end_token-}" >&"${__sw_out}"
  builtin printf '%s' "${__sw_end_token-}" >&"${__sw_err}"
  builtin printf '{"count":%d,"ok":%s,"exitCode":%d,"interrupted":%s,"result":null,"error":%s}\n' \
    "${__sw_count-0}" "$ok" "$status" "$interrupted" "$error" >&"${__sw_reply}"
  __sw_ok=''
  __sw_end_token=''
  __sw_exited=''
  if [[ -n ${__sw_errexit-} ]]; then
    __sw_errexit=''
    builtin set -e
  fi
}

readonly -f __sw_begin __sw_end __sw_report __sw_leave __sw_on_err exit
builtin printf '{"ev":"ready","pid":%d}\n' "$$" >&"${__sw_reply}"
