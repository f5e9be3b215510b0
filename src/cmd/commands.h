// One Register function per subcommand; main.cc wires them into the CLI11 app. Each
// subcommand's callback sets the process exit code through `exit_code`.
#pragma once

namespace CLI {
class App;
}

namespace tierfs::cmd {

void RegisterFormat(CLI::App& app, int* exit_code);
void RegisterMount(CLI::App& app, int* exit_code);
void RegisterUmount(CLI::App& app, int* exit_code);
void RegisterStatus(CLI::App& app, int* exit_code);
void RegisterInfo(CLI::App& app, int* exit_code);
void RegisterGc(CLI::App& app, int* exit_code);
void RegisterFsck(CLI::App& app, int* exit_code);
void RegisterVersion(CLI::App& app, int* exit_code);
void RegisterConfig(CLI::App& app, int* exit_code);
void RegisterDump(CLI::App& app, int* exit_code);
void RegisterLoad(CLI::App& app, int* exit_code);
void RegisterObjbench(CLI::App& app, int* exit_code);
void RegisterWarmup(CLI::App& app, int* exit_code);
void RegisterCacheServer(CLI::App& app, int* exit_code);
void RegisterUploadStaged(CLI::App& app, int* exit_code);
void RegisterCompact(CLI::App& app, int* exit_code);
void RegisterRmr(CLI::App& app, int* exit_code);
void RegisterClone(CLI::App& app, int* exit_code);
void RegisterQuota(CLI::App& app, int* exit_code);
void RegisterRestore(CLI::App& app, int* exit_code);
void RegisterStats(CLI::App& app, int* exit_code);
void RegisterProfile(CLI::App& app, int* exit_code);
void RegisterSummary(CLI::App& app, int* exit_code);
void RegisterDestroy(CLI::App& app, int* exit_code);
void RegisterGateway(CLI::App& app, int* exit_code);
void RegisterGatewayUser(CLI::App& app, int* exit_code);
void RegisterSync(CLI::App& app, int* exit_code);
void RegisterChangelog(CLI::App& app, int* exit_code);
void RegisterMirror(CLI::App& app, int* exit_code);

}  // namespace tierfs::cmd
