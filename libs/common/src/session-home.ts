/**
 * A session's home directory: one per session, inside its workspace so that it goes wherever the workspace goes (every
 * tier's sandbox, checkpoints, restores and forks, the workspace quota, deletion with the session). Everything that
 * installs "for the user" (`pip install`, `pip install --user`, `npm install -g`, caches, dotfiles) lands here, so
 * every later action of the session sees it, in any tier.
 */
export const SESSION_HOME_NAME = '.home';

/** `HOME` inside every sandbox: the workspace is mounted at `/workspace` in every tier and backend. */
export const SESSION_HOME = `/workspace/${SESSION_HOME_NAME}`;
