// A stream (a directory's or a prefix's) with its first entries read ahead by a listing
// thread (tree_lister.cc, store_lister.cc).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>

#include "common/status.h"
#include "sync/entry.h"

namespace tierfs::sync {

template <class Stream>
struct ReadAhead {
  std::unique_ptr<Stream> stream;
  std::deque<Entry> head;  // its first entries, in the stream's order
  bool ended = false;      // head holds all of them
};

// Reads up to n entries of s ahead; an error of the stream is the result.
template <class Stream>
Result<ReadAhead<Stream>> ReadHead(std::unique_ptr<Stream> s, size_t n) {
  ReadAhead<Stream> a;
  a.stream = std::move(s);
  while (a.head.size() < n) {
    Entry e;
    ASSIGN_OR_RETURN(bool more, a.stream->Next(&e));
    if (!more) {
      a.ended = true;
      break;
    }
    a.head.push_back(std::move(e));
  }
  return a;
}

}  // namespace tierfs::sync
