// tierfs upload-staged META-URL DIR: uploads the blocks another client staged for write-back
// (`mount --writeback`) and left behind, from its staging area DIR (CACHE-DIR/VOLUME-UUID/
// staging, or the CACHE-DIR itself), and drops their staged marks. For a host whose client
// will not mount again: its disk moved to another machine, or the data is wanted now.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "client/bucket_claim.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/bucket_owner.h"
#include "tools/staged_upload.h"

namespace tierfs::cmd {
namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int Run(const std::string& meta_url, const std::string& dir_arg, int threads) {
  auto meta = OpenVolume(meta_url, /*read_only=*/false);
  if (!meta.ok()) return Fail("upload-staged", meta.status());
  const FormatRecord& fmt = (*meta)->format();
  std::string dir = AbsPath(dir_arg);
  if (!IsDir(dir)) return Fail("upload-staged", Status::Err(ENOENT, dir + " is not a directory"));
  // Given the cache directory, the volume's staging area is inside it.
  if (IsDir(dir + "/" + fmt.uuid + "/staging")) dir += "/" + fmt.uuid + "/staging";
  auto store = OpenStore(fmt);
  if (!store.ok()) return Fail("upload-staged", store.status());
  auto owner = OwnBucketFor((*meta)->engine(), store->get(), fmt, meta_url, "upload-staged");
  if (!owner.ok()) return Fail("upload-staged", owner.status());
  StagedFiles found = CountStaged(dir);
  std::cerr << "uploading " << found.blocks << " blocks (" << FormatSize(found.bytes) << ") from " << dir << "\n";
  auto r = UploadStaged(meta->get(), std::move(*store), dir, threads, std::chrono::hours(24 * 365),
                        [](uint64_t blocks, uint64_t bytes) {
                          std::cerr << "  " << blocks << " blocks (" << FormatSize(bytes) << ") to go\n";
                        });
  if (!r.ok()) return Fail("upload-staged", r.status());
  std::cout << "uploaded " << r->uploaded_blocks << " blocks (" << FormatSize(r->uploaded_bytes) << ")";
  if (r->lost > 0) std::cout << "; " << r->lost << " staged blocks were unreadable and are lost (see the log)";
  std::cout << std::endl;
  if (r->left_blocks > 0 || r->lost > 0) return 1;
  return 0;
}

}  // namespace

void RegisterUploadStaged(CLI::App& app, int* exit_code) {
  auto meta_url = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(8);
  auto* sub = app.add_subcommand("upload-staged",
                                 "Upload the blocks a client staged for write-back and left behind (its staging area)");
  sub->add_option("META-URL", *meta_url, "Metadata engine of the volume")->required();
  sub->add_option("DIR", *dir, "The staging area: CACHE-DIR/VOLUME-UUID/staging, or the CACHE-DIR")->required();
  sub->add_option("--threads", *threads, "Concurrent uploads")->capture_default_str();
  sub->callback([=] { *exit_code = Run(*meta_url, *dir, *threads); });
}

}  // namespace tierfs::cmd
