#include <CLI/CLI.hpp>
#include <iostream>

#include "cmd/commands.h"

#ifndef TIERFS_VERSION
#define TIERFS_VERSION "dev"
#endif

namespace tierfs::cmd {

void RegisterVersion(CLI::App& app, int* exit_code) {
  // `tierfs --version` (and -V), as most tools answer, besides `tierfs version`.
  app.set_version_flag("-V,--version", std::string("tierfs ") + TIERFS_VERSION, "Print the version of tierfs");
  auto* sub = app.add_subcommand("version", "Print the version of tierfs");
  sub->callback([exit_code] {
    std::cout << "tierfs " << TIERFS_VERSION << std::endl;
    *exit_code = 0;
  });
}

}  // namespace tierfs::cmd
