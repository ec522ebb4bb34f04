# shellcheck shell=bash
# A terminal's start-up (runner_terms.py: `bash --rcfile <this> -i`): what a login bash reads, in the same order,
# except that the session's PATH survives /etc/profile. Debian's /etc/profile sets PATH for a console login, which
# would drop the session's own directories (its ~/.local/bin, ~/.npm-global/bin, the sandbox's tools): a command an
# earlier action installed would not be found in the terminal. The user's profile may still change PATH after it.
__switchyard_path=$PATH
if [ -r /etc/profile ]; then
  # shellcheck source=/dev/null
  . /etc/profile
fi
PATH=$__switchyard_path
export PATH
unset __switchyard_path
for __switchyard_profile in ~/.bash_profile ~/.bash_login ~/.profile; do
  if [ -r "$__switchyard_profile" ]; then
    # shellcheck source=/dev/null
    . "$__switchyard_profile"
    break
  fi
done
unset __switchyard_profile
