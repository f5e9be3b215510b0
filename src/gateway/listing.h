// ListObjects over directories, in S3's order, a page at a time, at a cost proportional to
// the page.
//
// S3 sorts keys as byte strings: "a-b" (0x2D) comes before "a/b" (0x2F), although a walk of
// directory "a" would come first in a directory listing. So within a directory, an entry's
// place is its name for a file and its name + "/" for a directory: a directory is visited
// once the names that sort between "name" and "name/" (those continuing with a byte below
// '/', such as "name-2" or "name.txt") were emitted. Directories met in the name stream wait
// in a small set until their turn.
//
// Continuation is stateless: a page ends at a key (or common prefix), and the next page
// starts after it by walking down that key's directories, scanning each from where the key
// left it (Meta::ReaddirPage); the few directories whose turn comes after the key although
// their names sort before it (a proper prefix of the key's component followed by a byte below
// '/', or the component itself for a file) are looked up by name. No directory is read
// beyond what the page needs.
//
// A directory is an object "dir/" when a "dir/" object was put (it is marked) or when it is
// empty (made through a mount); with the delimiter "/" every directory is a common prefix.
// Other delimiters are served by the full walk, grouping keys as they come (their cost is
// proportional to the keys passed over). The gateway's own directory (.tierfs-gateway in the
// volume's root) and files that are not regular (symlinks, devices) are not objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/objects.h"
#include "gateway/s3_error.h"

namespace tierfs::gateway {

struct ListRequest {
  std::string prefix;
  std::string delimiter;
  std::string start_after;  // keys after this one (exclusive); "" from the first
  size_t max_keys = 1000;
};

struct ListedObject {
  std::string key;
  ObjectInfo info;
};

struct ListResult {
  std::vector<ListedObject> objects;
  std::vector<std::string> prefixes;  // common prefixes
  bool truncated = false;
  std::string last;  // the last key or common prefix returned (the next page starts after it)
};

class Lister {
 public:
  explicit Lister(Objects* objects) : objects_(objects) {}
  S3Result<ListResult> List(const Caller& c, Ino bucket, const ListRequest& req);

 private:
  Objects* objects_;
};

}  // namespace tierfs::gateway
