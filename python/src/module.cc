// The native half of the Python SDK: tierfs._tierfs, a thin binding of sdk::PathClient
// (src/sdk/path_client.h). The Python half (python/tierfs/) builds the public API on it:
// file objects, os.stat_result, walk, fork safety, fsspec.
//
// Every call that may wait on the engine or the store runs without the GIL. Errors come
// out as OSError(errno, message), which Python turns into FileNotFoundError,
// PermissionError and the other subclasses by errno.
#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "sdk/client_options.h"
#include "sdk/fork_safe_log.h"
#include "sdk/path_client.h"

namespace py = pybind11;

namespace tierfs::sdk {
namespace {

struct StatusError {
  Status status;
};

[[noreturn]] void Raise(const Status& st) { throw StatusError{st}; }
void Check(const Status& st) {
  if (!st.ok()) Raise(st);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

py::tuple StatTuple(Ino ino, const Attr& a) {
  return py::make_tuple(a.mode, ino, a.nlink, a.uid, a.gid, a.length, a.atime_ns, a.mtime_ns, a.ctime_ns, a.rdev,
                        a.IsRegular() ? (a.allocated + 511) / 512 : (a.length + 511) / 512);
}

// One client of one volume, as Python holds it. `Abandon` is for a forked child: the
// parent's threads do not exist there and its locks may be held, so the child must never
// run the destructor (which joins threads and commits); it lets the object go unfreed and
// opens a client of its own.
class NativeClient {
 public:
  explicit NativeClient(const py::dict& options) {
    client::VolumeOptions vo;
    std::map<std::string, std::string> given;
    for (auto item : options) {
      given[py::str(item.first)] = py::str(item.second);
    }
    Check(ApplyClientOptions(given, &vo));
    {
      py::gil_scoped_release nogil;
      client_ = Take(PathClient::Connect(vo));
    }
    owner_pid_ = getpid();
  }
  ~NativeClient() {
    if (getpid() != owner_pid_) {
      (void)client_.release();  // a forked child: see above
      return;
    }
    py::gil_scoped_release nogil;
    client_.reset();
  }

  PathClient& c() {
    if (getpid() != owner_pid_) {
      Raise(Status::Err(EBADF, "this client was opened in process " + std::to_string(owner_pid_) +
                                   " and cannot be used after fork(); tierfs.Client reconnects by itself"));
    }
    if (!client_ || client_->closed()) Raise(Status::Err(EBADF, "the client is closed"));
    return *client_;
  }
  void Abandon() {
    (void)client_.release();
  }
  void Close() {
    if (getpid() != owner_pid_) return Abandon();
    if (client_) client_->Close();
  }
  bool closed() const { return !client_ || client_->closed(); }
  std::string format_json() {
    if (!client_) return "{}";
    return client_->FormatJson();
  }

 private:
  std::unique_ptr<PathClient> client_;
  pid_t owner_pid_ = 0;
};

#define NOGIL py::call_guard<py::gil_scoped_release>()

}  // namespace
}  // namespace tierfs::sdk

PYBIND11_MODULE(_tierfs, m) {
  using namespace tierfs;
  using namespace tierfs::sdk;
  m.doc() = "TierFS native client (use the tierfs package, not this module)";
  InstallForkSafeLogging();
  // For tests: n log lines at a level, from the calling thread, without the GIL.
  m.def("_log_for_tests", [](int n, const std::string& level) {
    auto lv = spdlog::level::from_str(level);
    py::gil_scoped_release nogil;
    for (int i = 0; i < n; ++i) spdlog::log(lv, "log line {} for a test", i);
  });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      int code = e.status.code() > 0 ? e.status.code() : EIO;
      py::object err = py::reinterpret_steal<py::object>(
          PyObject_CallFunction(PyExc_OSError, "is", code, e.status.message().c_str()));
      if (err) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });

  m.def("format", [](const py::dict& options) {
    std::map<std::string, std::string> given;
    for (auto item : options) given[py::str(item.first)] = py::str(item.second);
    client::FormatOptions fo;
    Check(ApplyFormatOptions(given, &fo));
    client::Formatted done;
    {
      py::gil_scoped_release nogil;
      done = Take(client::FormatVolume(fo));
    }
    return py::make_tuple(done.record.ToJson(), done.warning);
  });

  py::class_<NativeClient>(m, "NativeClient")
      .def(py::init<const py::dict&>())
      .def("close", [](NativeClient& s) {
        py::gil_scoped_release nogil;
        s.Close();
      })
      .def("abandon", &NativeClient::Abandon)
      .def_property_readonly("closed", &NativeClient::closed)
      .def("format_json", &NativeClient::format_json)
      .def("stat", [](NativeClient& s, const std::string& path, bool follow) {
        Stat st;
        {
          py::gil_scoped_release nogil;
          st = Take(s.c().GetStat(path, follow));
        }
        return StatTuple(st.ino, st.attr);
      })
      .def("access", [](NativeClient& s, const std::string& path, int mask) {
        Status st;
        {
          py::gil_scoped_release nogil;
          st = s.c().Access(path, mask);
        }
        if (st.ok()) return true;
        if (st.code() == EACCES || st.code() == ENOENT || st.code() == EROFS || st.code() == EPERM) return false;
        Raise(st);
      })
      .def("listdir", [](NativeClient& s, const std::string& path) {
        std::vector<Listed> l;
        {
          py::gil_scoped_release nogil;
          l = Take(s.c().List(path));
        }
        py::list out;
        for (const auto& e : l) out.append(py::make_tuple(py::bytes(e.name), e.ino, e.type));
        return out;
      })
      .def("mkdir", [](NativeClient& s, const std::string& p, uint32_t mode) { Check(s.c().Mkdir(p, mode)); }, NOGIL)
      .def("rmdir", [](NativeClient& s, const std::string& p) { Check(s.c().Rmdir(p)); }, NOGIL)
      .def("unlink", [](NativeClient& s, const std::string& p) { Check(s.c().Unlink(p)); }, NOGIL)
      .def("rename", [](NativeClient& s, const std::string& a, const std::string& b, uint32_t flags) {
        Check(s.c().Rename(a, b, flags));
      }, NOGIL)
      .def("link", [](NativeClient& s, const std::string& a, const std::string& b) { Check(s.c().Link(a, b)); }, NOGIL)
      .def("symlink", [](NativeClient& s, const std::string& t, const std::string& p) {
        Check(s.c().Symlink(t, p));
      }, NOGIL)
      .def("readlink", [](NativeClient& s, const std::string& p) {
        std::string t;
        {
          py::gil_scoped_release nogil;
          t = Take(s.c().Readlink(p));
        }
        return py::bytes(t);
      })
      .def("chmod", [](NativeClient& s, const std::string& p, uint32_t mode, bool follow) {
        Check(s.c().Chmod(p, mode, follow));
      }, NOGIL)
      .def("chown", [](NativeClient& s, const std::string& p, int64_t uid, int64_t gid, bool follow) {
        Check(s.c().Chown(p, uid, gid, follow));
      }, NOGIL)
      .def("utime", [](NativeClient& s, const std::string& p, int64_t a, int64_t m, bool now, bool follow) {
        Check(s.c().Utime(p, a, m, now, follow));
      }, NOGIL)
      .def("truncate", [](NativeClient& s, const std::string& p, uint64_t len) { Check(s.c().Truncate(p, len)); },
           NOGIL)
      .def("getxattr", [](NativeClient& s, const std::string& p, const std::string& name, bool follow) {
        std::string v;
        {
          py::gil_scoped_release nogil;
          v = Take(s.c().GetXattr(p, name, follow));
        }
        return py::bytes(v);
      })
      .def("setxattr", [](NativeClient& s, const std::string& p, const std::string& name, const py::bytes& value,
                          int flags, bool follow) {
        std::string v = value;
        py::gil_scoped_release nogil;
        Check(s.c().SetXattr(p, name, v, flags, follow));
      })
      .def("listxattr", [](NativeClient& s, const std::string& p, bool follow) {
        py::gil_scoped_release nogil;
        return Take(s.c().ListXattr(p, follow));
      })
      .def("removexattr", [](NativeClient& s, const std::string& p, const std::string& name, bool follow) {
        Check(s.c().RemoveXattr(p, name, follow));
      }, NOGIL)
      .def("clone", [](NativeClient& s, const std::string& a, const std::string& b) { Check(s.c().Clone(a, b)); },
           NOGIL)
      .def("rmr", [](NativeClient& s, const std::string& p) { Check(s.c().RemoveTree(p)); }, NOGIL)
      .def("summary", [](NativeClient& s, const std::string& p) { return Take(s.c().Summary(p)); }, NOGIL)
      .def("warmup", [](NativeClient& s, const std::string& p) { return Take(s.c().Warmup(p)); }, NOGIL)
      .def("statvfs", [](NativeClient& s) {
        StatFs f;
        {
          py::gil_scoped_release nogil;
          f = Take(s.c().StatVolume());
        }
        uint64_t avail = f.available_bytes ? *f.available_bytes
                                           : (f.capacity_bytes > f.used_bytes ? f.capacity_bytes - f.used_bytes : 0);
        return py::make_tuple(f.capacity_bytes, f.used_bytes, avail, f.inodes, f.max_inodes);
      })
      .def("get_quota", [](NativeClient& s, char kind, const std::string& p, uint64_t id) -> py::object {
        std::optional<Quota> q;
        {
          py::gil_scoped_release nogil;
          q = Take(s.c().GetQuota(static_cast<QuotaKind>(kind), p, id));
        }
        if (!q) return py::none();
        return py::make_tuple(q->max_bytes, q->max_inodes, q->used_bytes, q->used_inodes);
      })
      .def("set_quota", [](NativeClient& s, char kind, const std::string& p, uint64_t id,
                           std::optional<int64_t> bytes, std::optional<int64_t> inodes) {
        py::gil_scoped_release nogil;
        Check(s.c().SetQuota(static_cast<QuotaKind>(kind), p, id, bytes, inodes));
      })
      .def("delete_quota", [](NativeClient& s, char kind, const std::string& p, uint64_t id) {
        py::gil_scoped_release nogil;
        Check(s.c().DeleteQuota(static_cast<QuotaKind>(kind), p, id));
      })
      .def("list_quotas", [](NativeClient& s) {
        std::vector<std::pair<Quota, std::string>> l;
        {
          py::gil_scoped_release nogil;
          l = Take(s.c().ListQuotas());
        }
        py::list out;
        for (const auto& [q, where] : l) {
          out.append(py::make_tuple(std::string(1, static_cast<char>(q.kind)), q.id, where, q.max_bytes,
                                    q.max_inodes, q.used_bytes, q.used_inodes));
        }
        return out;
      })
      .def("open", [](NativeClient& s, const std::string& p, int flags, uint32_t mode) {
        OpenFile f;
        {
          py::gil_scoped_release nogil;
          f = Take(s.c().Open(p, flags, mode));
        }
        return py::make_tuple(f.fh, f.ino);
      })
      .def("pread", [](NativeClient& s, uint64_t fh, uint64_t off, size_t n) {
        // Read straight into a new bytes object (no zero fill, no copy): nobody else holds
        // it until it is returned, so filling it without the GIL is safe.
        PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
        if (out == nullptr) throw py::error_already_set();
        auto ref = py::reinterpret_steal<py::object>(out);
        Result<size_t> got = Status::Err(EIO, "");
        {
          py::gil_scoped_release nogil;
          got = s.c().Read(fh, off, n, PyBytes_AS_STRING(out));
        }
        size_t len = Take(std::move(got));
        if (len != n) {
          PyObject* shrunk = ref.release().ptr();
          if (_PyBytes_Resize(&shrunk, static_cast<Py_ssize_t>(len)) != 0) throw py::error_already_set();
          return py::reinterpret_steal<py::bytes>(shrunk);
        }
        return py::reinterpret_steal<py::bytes>(ref.release());
      })
      .def("preadinto", [](NativeClient& s, uint64_t fh, uint64_t off, py::buffer b) {
        py::buffer_info info = b.request(/*writable=*/true);
        char* ptr = static_cast<char*>(info.ptr);
        size_t n = static_cast<size_t>(info.size * info.itemsize);
        py::gil_scoped_release nogil;  // the caller holds `b` for the call
        return Take(s.c().Read(fh, off, n, ptr));
      })
      .def("pwrite", [](NativeClient& s, uint64_t fh, uint64_t off, py::buffer b) {
        py::buffer_info info = b.request();
        const char* ptr = static_cast<const char*>(info.ptr);
        size_t n = static_cast<size_t>(info.size * info.itemsize);
        py::gil_scoped_release nogil;
        Check(s.c().Write(fh, off, ptr, n));
        return n;
      })
      .def("pappend", [](NativeClient& s, uint64_t fh, uint64_t ino, py::buffer b) {
        py::buffer_info info = b.request();
        const char* ptr = static_cast<const char*>(info.ptr);
        size_t n = static_cast<size_t>(info.size * info.itemsize);
        py::gil_scoped_release nogil;
        return std::make_pair(Take(s.c().Append(OpenFile{fh, ino}, ptr, n)), n);
      })
      .def("flush", [](NativeClient& s, uint64_t fh) { Check(s.c().Flush(fh)); }, NOGIL)
      .def("fsync", [](NativeClient& s, uint64_t fh) { Check(s.c().Fsync(fh)); }, NOGIL)
      .def("fstat", [](NativeClient& s, uint64_t fh, uint64_t ino) {
        Attr a;
        {
          py::gil_scoped_release nogil;
          a = Take(s.c().HandleStat(OpenFile{fh, ino}));
        }
        return StatTuple(ino, a);
      })
      .def("ftruncate", [](NativeClient& s, uint64_t fh, uint64_t ino, uint64_t len) {
        Check(s.c().HandleTruncate(OpenFile{fh, ino}, len));
      }, NOGIL)
      .def("close_file", [](NativeClient& s, uint64_t fh) { Check(s.c().Close(fh)); }, NOGIL);
}
