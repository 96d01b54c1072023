// cudyn — private_socket_path: where to put a named channel's socket file so
// that only this user can reach it. A socket in a shared directory such as
// /tmp can be raced for (another user binds the name first, and whoever
// connects hands their descriptors to that user) and is reachable by anyone
// the file mode lets in; a directory of mode 0700 that this user owns closes
// both doors before the credential check (peer_policy.hpp) is even reached.
#pragma once

#include "cudyn/core/result.hpp"

#include <string>

namespace cudyn {

// "<directory>/<name>", the directory created (mode 0700) when missing:
// $XDG_RUNTIME_DIR/cudyn where XDG_RUNTIME_DIR names a directory of this
// user with no access for others (as a login session's is), else
// ${TMPDIR:-/tmp}/cudyn-<uid>. An existing directory is used only when it
// is a real directory (not a link) owned by this user with no access for
// group or others: otherwise PermissionDenied, naming its owner or mode.
// InvalidArgument for an empty name, one with '/' or a NUL byte, "." or
// "..", or a path too long for a Unix socket. Two processes of the same
// user that ask for the same name get the same path. NotSupported on
// Windows.
Result<std::string> private_socket_path(const std::string& name);

}  // namespace cudyn
