#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-as-user.sh [MAKE ARGS...] - run `make check` as an unprivileged
# user, from root: make check must keep working as any user on a fresh
# clone (no root, no network, no apt). make test (so .ci/run) runs it.
#
# The user is CHECK_USER (default nobody), with its primary group alone,
# no capabilities and no way back to root (setpriv --no-new-privs), in an
# environment of PATH, LANG and its own HOME (nobody's does not exist).
# It works on a copy of this tree's files, tracked and untracked, never
# the ignored ones (build/ and the like), in a new directory of /tmp that
# it owns: built from nothing, as on a fresh clone. The copy is removed
# when make check passes and kept, for a look, when it fails.
set -eu
cd "$(dirname "$0")/.."
user=${CHECK_USER:-nobody}

[ "$(id -u)" = 0 ] || {
	echo "check-as-user: run as root, to become $user (as any other user, run make check itself)"
	exit 1
}
uid=$(id -u "$user" 2>/dev/null) || { echo "check-as-user: no user $user (CHECK_USER)"; exit 1; }
[ "$uid" != 0 ] || { echo "check-as-user: $user has uid 0: not an unprivileged user"; exit 1; }
group=$(id -gn "$user")
home=$(getent passwd "$user" | cut -d: -f6)

dir=$(mktemp -d "/tmp/pbox-check-$user.XXXXXX")
ok=0
trap '[ $ok = 1 ] && rm -rf "$dir" || echo "check-as-user: the copy is kept in $dir"' EXIT

# The tree's files; without git (a tarball), all but the build trees.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
	git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
		# tracked files deleted in the work tree are not copied
		if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
	done | tar --null -T - -cf - | tar -xf - -C "$dir"
else
	tar --exclude=./build --exclude='./build-*' --exclude=./.git -cf - . | tar -xf - -C "$dir"
fi
chown -R "$user:$group" "$dir"

as_user() {
	setpriv --reuid="$user" --regid="$group" --clear-groups --inh-caps=-all --no-new-privs \
		env -i PATH="$PATH" LANG="${LANG:-C.UTF-8}" HOME="$home" \
		${CUDA_HOME:+CUDA_HOME="$CUDA_HOME"} "$@"
}
who=$(as_user id)
case $who in
uid=0*) echo "check-as-user: still root: $who"; exit 1 ;;
esac
echo "check-as-user: make check in $dir as $who"
start=$(date +%s)
(cd "$dir" && as_user make check "$@")
ok=1
echo "check-as-user: make check passed as $user in $(($(date +%s) - start)) s (built from nothing)"
