// Where secrets come from: metadata passwords and object-store keys.
//
// A secret may be given inline (in a META-URL or a command-line flag), in an environment
// variable NAME, or in a file named by the environment variable NAME_FILE (trailing
// newlines stripped). Secrets are never logged: code that prints settings uses Redact().
#pragma once

#include <string>

#include "common/status.h"

namespace tierfs {

// Environment variables consulted when the META-URL carries no password.
inline constexpr char kMetaPasswordEnv[] = "TIERFS_META_PASSWORD";
// Environment variables for object-store credentials (override what the volume stores).
inline constexpr char kAccessKeyEnv[] = "TIERFS_ACCESS_KEY";
inline constexpr char kSecretKeyEnv[] = "TIERFS_SECRET_KEY";

// Returns given when non-empty, else $env_name, else the contents of the file named by
// $env_name_FILE, else "". Fails only when the _FILE variable names an unreadable file.
Result<std::string> ResolveSecret(const std::string& given, const std::string& env_name);

// Reads a secret from a file (trailing "\n"/"\r\n" stripped), with an error naming the file.
Result<std::string> ReadSecretFile(const std::string& path);

// "" for an empty secret, "****" otherwise.
std::string Redact(const std::string& secret);

}  // namespace tierfs
