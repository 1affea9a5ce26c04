// hubfs._core: hf:// files without a mount, for Python (python/hubfs/_remote.py builds the file
// object and the listing helpers on it).
//
// A Session is stack/session.h's RepoSession: one repo pinned to a commit, read through the same
// transport, block cache (same directory and keys as a mount), shared tier and verification as
// a mount. Sessions are kept per (repo, revision, options), so a thousand opens of files of one
// repo build one cache and one connection pool. Memory stays bounded: a session holds a memory
// cache of up to 256 MiB, its connections and threads, so whenever a session is made, the idle
// ones (no open file holds them) beyond the kIdleSessions used last shut down (their blocks are
// in the disk cache: reopening them is warm). close_sessions() ends every idle one (hubfs
// registers it with atexit, so queued cache writes finish before the process goes).
//
// Fork: a session is a process's own (its transport, cache and reader threads, their locks). A
// forked child never touches its parent's: the registry is emptied in the child (pthread_atfork),
// and a Session, File or byte source made before the fork is kept, never destroyed, when the
// child lets go of it (a destructor would join threads the child does not have). Using one in the
// child raises OSError; hubfs.HubFile and h5chunk.File reopen themselves there instead, by URL.
//
// A read releases the GIL. On the main thread (the only one a Ctrl-C reaches) a read that may
// wait on the Hub runs on a helper thread while the caller wakes every kPollInterval to run
// Python's signal handlers: a KeyboardInterrupt propagates at once, and the helper finishes into
// its own slices (never the caller's buffer), holding the file and session alive until then. A
// read the caches answer (h5hub/local_reads.h: the handle's last block, or blocks in the disk
// cache) runs on the caller's thread: a helper per read cost more than the read; so does the
// open of a file whose directories' listings the cache holds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <Python.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "stack/hub_file.h"
#include "reader/block_ranges.h"
#include "reader/block_reader.h"
#include "h5hub/hub_byte_source.h"
#include "h5hub/local_reads.h"

namespace py = pybind11;

namespace {

using hubfs::Code;
using hubfs::Status;

// How often a waiting main thread wakes to check for Ctrl-C: short enough that an interrupt
// feels immediate, long enough that the wake-ups cost nothing next to a read.
constexpr auto kPollInterval = std::chrono::milliseconds(25);

// The capsule name under which File.byte_source() hands an h5chunk::ByteSource to h5chunk's
// extension (python/src/h5chunk_module.cc checks it). Both extensions are built from the same
// h5chunk/byte_source.h in one build; the version suffix changes with that interface.
constexpr const char* kByteSourceCapsule = "h5chunk.ByteSource.v2";

// The Python exception for a Status, with the errno as OSError's first argument: a missing
// repo, revision or path is FileNotFoundError; a private or gated repo without access is
// PermissionError; a malformed URL or option is ValueError; anything else OSError. The message
// is the library's: it carries the cause and the fix.
[[noreturn]] void raise_status(const Status& s) {
  if (s.code() == Code::kInvalidArgument) throw py::value_error(s.message());
  PyObject* type = PyExc_OSError;
  if (s.code() == Code::kNotFound) type = PyExc_FileNotFoundError;
  if (s.code() == Code::kPermissionDenied) type = PyExc_PermissionError;
  if (s.code() == Code::kTimeout) type = PyExc_TimeoutError;
  py::object args = py::make_tuple(hubfs::errno_of(s), s.message());
  PyErr_SetObject(type, args.ptr());
  throw py::error_already_set();
}

// The interpreter's main thread (the one Python runs signal handlers on): threading's, asked
// once at import; in a forked child the thread that forked, which Python makes its main thread.
unsigned long main_thread = 0;

// Whether the caller (holding the GIL) is the main thread: only its waits must stay
// interruptible, so only it asks whether a call can wait on the Hub.
bool on_main_thread() { return PyThread_get_thread_ident() == main_thread; }

// Runs fn (which must not touch Python) with the GIL released. On the main thread, unless
// `local` (fn cannot wait on the network), it runs on a helper thread so a Ctrl-C interrupts the
// wait; fn's captures must own what it uses.
template <typename T>
T run_interruptibly(std::function<T()> fn, bool local = false) {
  if (local || !on_main_thread()) {
    py::gil_scoped_release nogil;
    return fn();
  }
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<T> result;
  };
  auto state = std::make_shared<State>();
  std::thread([state, fn = std::move(fn)] {
    T r = fn();
    std::lock_guard<std::mutex> lock(state->mu);
    state->result.emplace(std::move(r));
    state->done = true;
    state->cv.notify_all();
  }).detach();
  py::gil_scoped_release nogil;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(state->mu);
      if (state->cv.wait_for(lock, kPollInterval, [&] { return state->done; })) return std::move(*state->result);
    }
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // the helper finishes on its own
  }
}

// This process's id. Every call into a Session or a File compares it with the id of the process
// that made the object (~14 times per h5py open of a file), and getpid() is a system call (~1.5
// us on this VM): it is read once here and renewed in the child of a fork, first thing, by the
// pthread_atfork handler below (glibc's fork() and Python's os.fork() run it).
pid_t this_process = ::getpid();

// What a forked child's objects held of its parent's sessions: kept, never destroyed (see the
// top). Touched with the GIL held only.
std::vector<std::shared_ptr<void>>& left_by_parent() {
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  return *kept;
}

// Drops `p`: released as usual in the process that made it (`owner`), kept in any other.
template <typename T>
void let_go(std::shared_ptr<T>& p, pid_t owner) {
  if (p && owner != this_process) left_by_parent().push_back(std::move(p));
  p.reset();
}

[[noreturn]] void raise_made_before_fork(const char* what) {
  py::object args = py::make_tuple(EBADF, std::string("this ") + what + " was opened in another process (before a "
      "fork); its connections and threads stayed there. Open it again in this process (hubfs.open and "
      "h5chunk.File objects do so on their own)");
  PyErr_SetObject(PyExc_OSError, args.ptr());
  throw py::error_already_set();
}

struct Session {
  std::shared_ptr<hubfs::RepoSession> s;
  std::shared_ptr<hubfs::ListedDirs> dirs;  // what opens without the Hub (h5hub/local_reads.h)
  pid_t pid = this_process;
  Session() = default;
  Session(std::shared_ptr<hubfs::RepoSession> session, std::shared_ptr<hubfs::ListedDirs> listed)
      : s(std::move(session)), dirs(std::move(listed)) {}
  Session(const Session&) = default;
  Session& operator=(const Session&) = default;
  ~Session() { let_go(s, pid); }
  const std::shared_ptr<hubfs::RepoSession>& get() const {
    if (pid != this_process) raise_made_before_fork("hf:// session");
    return s;
  }
};

struct File {
  std::shared_ptr<hubfs::HubFile> f;
  pid_t pid = this_process;
  std::shared_ptr<hubfs::RecentBlock> recent = std::make_shared<hubfs::RecentBlock>();  // the last read's
  explicit File(std::shared_ptr<hubfs::HubFile> file) : f(std::move(file)) {}
  File(const File&) = default;
  ~File() { let_go(f, pid); }
  hubfs::HubFile& get() { return *held(); }
  // The file, to hold across a read; raises if closed or opened in another process.
  std::shared_ptr<hubfs::HubFile> held() {
    if (!f) throw py::value_error("I/O operation on closed file");
    if (pid != this_process) raise_made_before_fork("hf:// file");
    return f;
  }
};

// Sessions by everything that decides what they read and how. Never destroyed with the module
// (a static destructor would run after the interpreter is gone): close_sessions() empties it.
struct Registered {
  std::shared_ptr<hubfs::RepoSession> session;
  uint64_t last_used = 0;  // registry_clock at its last get_session
  std::shared_ptr<hubfs::ListedDirs> dirs = std::make_shared<hubfs::ListedDirs>();
};
std::mutex registry_mu;  // a leaf lock: held only to find, insert or pick idle sessions, never across a build or a shutdown
uint64_t registry_clock = 0;  // guarded by registry_mu
std::map<std::string, Registered>& registry() {
  static auto* r = new std::map<std::string, Registered>();
  return *r;
}

// Idle sessions kept for reuse (idle: no open file, no Python Session object holds it).
constexpr size_t kIdleSessions = 4;

// curl's receive buffer for hf:// sessions (SessionConfig::receive_buffer_bytes; docs/constants.md).
constexpr long kLibraryReceiveBufferBytes = 64 * 1024;

// Takes out of the registry the idle sessions beyond the kIdleSessions used last; the caller
// destroys them without the lock (a shutdown waits for the cache's queued writes).
std::vector<std::shared_ptr<hubfs::RepoSession>> take_excess_idle_locked() {
  std::vector<std::map<std::string, Registered>::iterator> idle;
  for (auto it = registry().begin(); it != registry().end(); ++it) {
    if (it->second.session.use_count() == 1) idle.push_back(it);  // the registry's is the only reference
  }
  std::vector<std::shared_ptr<hubfs::RepoSession>> gone;
  if (idle.size() <= kIdleSessions) return gone;
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a->second.last_used < b->second.last_used; });
  for (size_t i = 0; i + kIdleSessions < idle.size(); ++i) {
    gone.push_back(std::move(idle[i]->second.session));
    registry().erase(idle[i]);
  }
  return gone;
}

// The block a file's session reads in (hubfs.open's block_size): the unit uncached_blocks counts
// in. A mount's when the session has no reader.
uint32_t reader_block(const hubfs::Stack& stack) {
  return stack.reader ? stack.reader->options().block_size : hubfs::kDefaultBlockSize;
}

// Python's (offset, length) pairs as the reader's ranges.
std::vector<hubfs::ByteRange> byte_ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::vector<hubfs::ByteRange> r;
  r.reserve(ranges.size());
  for (const auto& [offset, length] : ranges) r.push_back({offset, length});
  return r;
}

// The blocks (of `block` bytes) holding these (offset, length) ranges of a file of `size` bytes,
// ascending, each once; the parts past the end left out (hubfs::blocks_within).
std::vector<uint64_t> blocks_of(const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t size,
                                uint32_t block) {
  return hubfs::blocks_within(byte_ranges(ranges), size, block);
}

std::string key_of(const hubfs::RepoRef& repo, const hubfs::SessionConfig& c) {
  std::string k = std::string(hubfs::api_segment(repo.type)) + "/" + repo.id + "@" + repo.revision;
  auto add = [&k](const std::string& v) { k += '\x1f' + v; };
  add(c.endpoint);
  add(c.cache_dir);
  add(std::to_string(c.cache_size));
  add(std::to_string(c.read_timeout_s));
  add(std::to_string(c.max_requests));
  add(std::to_string(c.memory_cache_bytes));
  add(std::to_string(c.block_size));
  add(std::to_string(c.read_ahead_bytes));
  add(c.token ? "t" + *c.token : "env");
  add(c.offline ? "offline" : "online");
  for (const auto& s : c.shared_cache) add("shared=" + s);
  add(c.shared_cache_key_file);
  add(c.shared_cache_private ? "private" : "");
  add(c.ca_bundle);
  return k;
}

Session get_session(const std::string& type, const std::string& id, const std::string& revision,
                    const std::string& endpoint, const std::string& cache_dir, uint64_t cache_size,
                    std::optional<std::string> token, int max_requests, int read_timeout,
                    std::vector<std::string> shared_cache, std::string shared_cache_key_file,
                    bool shared_cache_private, bool offline, std::string ca_bundle, std::string first_file,
                    uint64_t memory_cache, uint64_t block_size, std::optional<uint64_t> read_ahead) {
  auto ref = hubfs::parse_repo_ref(type + "s/" + id, std::nullopt, revision);
  if (!ref.ok()) raise_status(ref.status());
  hubfs::SessionConfig c;
  c.endpoint = endpoint;
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  c.cache_dir = cache_dir;
  c.cache_size = cache_size;
  c.token = std::move(token);
  if (max_requests < 1) throw py::value_error("max_requests must be at least 1");
  if (read_timeout < 1) throw py::value_error("read_timeout must be at least 1 (seconds)");
  c.max_requests = max_requests;
  // A library in someone else's process: glibc's default malloc returns the heap curl frees at
  // each transfer's end, and 512 KiB receive buffers were faulted in afresh (a training loop's
  // planner: 11,000-24,000 page faults per cold epoch, 4,000 at 64 KiB; docs/constants.md).
  c.receive_buffer_bytes = kLibraryReceiveBufferBytes;
  c.memory_cache_bytes = memory_cache;
  if (Status st = hubfs::check_block_size(block_size); !st.ok()) throw py::value_error("hubfs.open: " + st.message());
  c.block_size = static_cast<uint32_t>(block_size);
  if (read_ahead) c.read_ahead_bytes = *read_ahead;  // none: no cap
  c.read_timeout_s = read_timeout;
  c.shared_cache = std::move(shared_cache);
  c.shared_cache_key_file = std::move(shared_cache_key_file);
  c.shared_cache_private = shared_cache_private;
  c.offline = offline;
  c.ca_bundle = std::move(ca_bundle);
  if (Status st = hubfs::apply_environment_timeouts(c); !st.ok()) raise_status(st);
  const std::string key = key_of(*ref, c);
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = registry().find(key);
    if (it != registry().end()) {
      it->second.last_used = ++registry_clock;
      return Session(it->second.session, it->second.dirs);
    }
  }
  // Built outside the lock (it may wait on the Hub); two threads racing build two, one is kept.
  // One that asks the Hub nothing (a commit the cache holds: a forked or unpickled file's
  // session) is built on this thread.
  bool local = false;
  if (on_main_thread()) {
    py::gil_scoped_release nogil;
    local = hubfs::session_needs_no_request(c, hubfs::RepoSpec{*ref, ""}, first_file);
  }
  auto built = run_interruptibly<std::pair<Status, std::shared_ptr<hubfs::RepoSession>>>([ref = *ref, c, first_file] {
    auto s = std::make_shared<hubfs::RepoSession>(hubfs::Env::real());
    Status st = hubfs::open_repo_session(c, hubfs::RepoSpec{ref, ""}, *s, {}, first_file);
    return std::make_pair(st, st.ok() ? s : nullptr);
  }, local);
  if (!built.first.ok()) raise_status(built.first);
  Session out;
  std::vector<std::shared_ptr<hubfs::RepoSession>> gone;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto [it, inserted] = registry().emplace(key, Registered{built.second, 0});
    it->second.last_used = ++registry_clock;
    out = Session(it->second.session, it->second.dirs);  // held: never idle while being handed out
    gone = take_excess_idle_locked();
  }
  py::gil_scoped_release nogil;
  gone.clear();  // their shutdowns (queued cache writes first), without the registry's lock
  built.second.reset();  // the loser of a race to build this key shuts down here too
  return out;
}

py::tuple path_info(const hubfs::PathInfo& p) { return py::make_tuple(p.path, p.is_dir, p.size); }

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "hf:// files without a mount: the mount's reader, cache and verification in-process";
  // HUBFS_LOG_LEVEL as the programs read it; a bad value must not make the import fail.
  // A child forked with sessions in the registry keeps them (never shut down there: see the top)
  // and starts with none; registry_mu is held across the fork so the child's copy is free.
  pthread_atfork([] { registry_mu.lock(); }, [] { registry_mu.unlock(); }, [] {
    this_process = ::getpid();
    for (auto& [key, r] : registry()) {
      left_by_parent().push_back(std::move(r.session));
      left_by_parent().push_back(std::move(r.dirs));  // its lock may have been held at the fork
    }
    registry().clear();
    registry_mu.unlock();
    main_thread = PyThread_get_thread_ident();
  });
  main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  if (!hubfs::set_log_level_from_env())
    hubfs::log_warning("HUBFS_LOG_LEVEL must be debug, info, warning or error; it is ignored");

  m.def("parse_url", [](const std::string& url, std::optional<std::string> revision) {
        auto u = hubfs::parse_hf_url(url, std::move(revision));
        if (!u.ok()) raise_status(u.status());
        return py::make_tuple(std::string(hubfs::type_name(u->repo.type)), u->repo.id, u->repo.revision, u->path);
      },
      py::arg("url"), py::arg("revision") = py::none(),
      "(type, id, revision, path) of hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH");
  m.def("default_endpoint", &hubfs::default_endpoint);
  m.def("default_cache_dir", &hubfs::default_cache_dir);
  m.def("parse_size", [](const std::string& text) {
    auto r = hubfs::parse_size(text);
    if (!r.ok()) raise_status(r.status());
    return *r;
  });
  m.def("get_session", &get_session, py::arg("type"), py::arg("id"), py::arg("revision"), py::arg("endpoint"),
        py::arg("cache_dir"), py::arg("cache_size"), py::arg("token"), py::arg("max_requests"),
        py::arg("read_timeout"), py::arg("shared_cache"), py::arg("shared_cache_key_file"),
        py::arg("shared_cache_private"), py::arg("offline"), py::arg("ca_bundle"), py::arg("first_file") = "",
        py::arg("memory_cache") = uint64_t{256} << 20, py::arg("block_size") = uint64_t{1} << 20,
        py::arg("read_ahead") = std::nullopt);
  m.def("close_sessions", [] {
    std::map<std::string, Registered> gone;
    {
      std::lock_guard<std::mutex> lock(registry_mu);
      gone.swap(registry());
    }
    py::gil_scoped_release nogil;
    gone.clear();  // shuts each stack down unless an open file still holds it
  }, "Ends every session no open file holds (the cache's queued writes finish first).");
  m.def("session_count", [] {
    std::lock_guard<std::mutex> lock(registry_mu);
    return registry().size();
  });
  m.attr("IDLE_SESSIONS") = kIdleSessions;

  py::class_<Session>(m, "Session")
      .def_property_readonly("commit", [](const Session& s) { return s.get()->info.commit; })
      // The commit's date, unix seconds (0: the Hub did not say): fsspec's modified().
      .def_property_readonly("last_modified", [](const Session& s) { return s.get()->info.last_modified; })
      .def_property_readonly("label", [](const Session& s) { return s.get()->label; })
      .def_property_readonly("private", [](const Session& s) { return s.get()->info.is_private; })
      .def_property_readonly("gated", [](const Session& s) { return s.get()->info.gated; })
      .def("open", [](const Session& s, const std::string& path) {
        // Where every directory above the file is listed already, opening it asks the Hub
        // nothing: on this thread (as a read the caches answer).
        bool local = false;
        if (s.dirs && on_main_thread()) {
          const hubfs::RepoSession& session = *s.get();
          py::gil_scoped_release nogil;
          local = s.dirs->opens_locally(session, path);
        }
        auto f = run_interruptibly<hubfs::Result<std::shared_ptr<hubfs::HubFile>>>(
            [session = s.get(), path]() -> hubfs::Result<std::shared_ptr<hubfs::HubFile>> {
              auto r = hubfs::HubFile::open(session, path);
              if (!r.ok()) return r.status();
              return std::shared_ptr<hubfs::HubFile>(std::move(r).value());
            }, local);
        if (!f.ok()) raise_status(f.status());
        if (s.dirs) s.dirs->opened(path);  // its siblings' opens need not list what it walked
        return File(*f);
      })
      .def("stat", [](const Session& s, const std::string& path) {
        auto r = run_interruptibly<hubfs::Result<hubfs::PathInfo>>(
            [session = s.get(), path] { return hubfs::stat_path(*session, path); });
        if (!r.ok()) raise_status(r.status());
        return path_info(*r);
      })
      .def("listdir", [](const Session& s, const std::string& path) {
        auto r = run_interruptibly<hubfs::Result<std::vector<hubfs::PathInfo>>>(
            [session = s.get(), path] { return hubfs::list_dir(*session, path); });
        if (!r.ok()) raise_status(r.status());
        py::list out;
        for (const auto& p : *r) out.append(path_info(p));
        return out;
      });

  py::class_<File>(m, "File")
      .def_property_readonly("size", [](File& f) { return f.get().size(); })
      .def_property_readonly("path", [](File& f) { return f.get().path(); })
      .def_property_readonly("block_size", [](File& f) { return reader_block(f.get().session()->stack); })
      .def_property_readonly("closed", [](const File& f) { return !f.f; })
      .def("readinto", [](File& f, py::object buffer, uint64_t offset) {
        std::shared_ptr<hubfs::HubFile> file = f.held();
        Py_buffer view;
        if (PyObject_GetBuffer(buffer.ptr(), &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
          throw py::error_already_set();
        std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> held(&view, PyBuffer_Release);
        const size_t len = static_cast<size_t>(view.len);
        // Filled to the end of the buffer or of the file: the reader serves at most 16 MiB per
        // call, and h5py's file-object driver takes a short read for the end of the file.
        bool local = false;
        if (on_main_thread()) {
          const uint64_t recent = f.recent->get();
          py::gil_scoped_release nogil;  // it may look at a few block files
          local = hubfs::reads_locally(*file, offset, len, recent);
        }
        auto slices = run_interruptibly<hubfs::Result<std::vector<hubfs::BlockBytes>>>(
            [file, offset, len]() -> hubfs::Result<std::vector<hubfs::BlockBytes>> {
              std::vector<hubfs::BlockBytes> all;
              size_t got = 0;
              while (got < len) {
                auto r = file->read(offset + got, len - got);
                if (!r.ok()) return r.status();
                if (r->empty()) break;
                for (auto& b : *r) {
                  got += b.size();
                  all.push_back(std::move(b));
                }
              }
              return all;
            }, local);
        if (!slices.ok()) raise_status(slices.status());
        size_t copied = 0;
        for (const auto& b : *slices) {
          std::memcpy(static_cast<char*>(view.buf) + copied, b.data(), b.size());
          copied += b.size();
        }
        f.recent->served(*file, offset, copied);
        return copied;
      }, py::arg("buffer"), py::arg("offset"), "Reads into buffer at offset; returns the bytes read (0 at end).")
      .def("hint", [](File& f, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, bool whole_runs) {
        const std::vector<hubfs::ByteRange> r = byte_ranges(ranges);
        const auto requests = whole_runs ? hubfs::HintRequests::kWholeRuns : hubfs::HintRequests::kSpread;
        hubfs::HubFile& file = f.get();  // in this process (raises in a forked child)
        hubfs::Result<uint64_t> n = [&] {
          py::gil_scoped_release nogil;  // a plan's hints: its arrival threads run meanwhile
          return file.hint(r, requests);
        }();
        if (!n.ok()) raise_status(n.status());
        return *n;
      }, py::arg("ranges"), py::arg("whole_runs") = false,
      "Fetches these (offset, length) ranges into the cache at once; returns the bytes scheduled. "
      "whole_runs: each run of neighbouring blocks in one request, not spread over the idle "
      "connections (a caller that sends many hints back to back).")
      .def("uncached_blocks", [](File& f, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
        // The blocks of these ranges the disk cache lacks, ascending: what a hint of them would
        // fetch from the Hub (h5chunk.FrameDataset.plan marks only those as on their way, and
        // hints nothing for a frame that has none). Every block without a disk cache. Looks at
        // each block file's header only.
        std::shared_ptr<hubfs::HubFile> file = f.held();
        py::gil_scoped_release nogil;
        const hubfs::Stack& stack = file->session()->stack;
        const uint32_t block = reader_block(stack);
        const std::string key = hubfs::BlockReader::disk_key(file->content_id(), block);
        std::vector<uint64_t> missing;
        for (uint64_t b : blocks_of(ranges, file->size(), block)) {
          char byte;
          if (!stack.cache || !stack.cache->read_part(key, b, 0, &byte, 1)) missing.push_back(b);
        }
        return missing;
      }, py::arg("ranges"), "The blocks of these (offset, length) ranges the disk cache lacks.")
      .def("wait_written", [](File& f, const std::vector<std::pair<uint64_t, uint64_t>>& ranges, double timeout) {
        // Returns once no block of these ranges this process fetched waits for its disk-cache
        // write any more (written, or skipped: a full disk), or after `timeout` seconds; true in the
        // first case. Blocks still on the wire are not waited for: a plan reads a byte of each
        // first (h5chunk.FrameDataset.plan, whose workers read the disk cache once it returns).
        std::shared_ptr<hubfs::HubFile> file = f.held();
        const hubfs::Stack& stack = file->session()->stack;
        if (!stack.reader) return true;
        const std::vector<uint64_t> blocks = blocks_of(ranges, file->size(), reader_block(stack));
        const auto budget = std::chrono::milliseconds(static_cast<int64_t>(std::clamp(timeout, 0.0, 86400.0) * 1000));
        py::gil_scoped_release nogil;
        return stack.reader->wait_written(file->content_id(), blocks,
                                          hubfs::Deadline::after(budget, stack.env->clock()));
      }, py::arg("ranges"), py::arg("timeout"),
      "Waits (at most timeout seconds) until no block of these ranges waits for its disk-cache write; "
      "True when none does.")
      .def("byte_source", [](File& f, const std::string& name) {
        // A heap shared_ptr the capsule owns: h5chunk copies it, so the file stays open for as
        // long as an h5chunk.File reads it, whatever happens to this object.
        // In a forked child the capsule keeps its source (see the top): its context is the pid
        // that made it.
        std::shared_ptr<hubfs::HubFile> file = f.held();
        auto* held = new std::shared_ptr<h5chunk::ByteSource>(std::make_shared<hubfs::HubByteSource>(file, name));
        py::capsule capsule(held, kByteSourceCapsule, [](PyObject* capsule) {
          auto* source = static_cast<std::shared_ptr<h5chunk::ByteSource>*>(PyCapsule_GetPointer(capsule, kByteSourceCapsule));
          const auto owner = static_cast<pid_t>(reinterpret_cast<intptr_t>(PyCapsule_GetContext(capsule)));
          let_go(*source, owner);
          delete source;
        });
        PyCapsule_SetContext(capsule.ptr(), reinterpret_cast<void*>(static_cast<intptr_t>(this_process)));
        return capsule;
      }, py::arg("name"), "The file as an h5chunk byte source (a capsule for h5chunk.File).")
      .def("close", [](File& f) {
        if (f.pid != this_process) return let_go(f.f, f.pid);
        py::gil_scoped_release nogil;
        f.f.reset();
      });
}
