// h5chunk._core: the C++ library's File and Dataset for Python.
//
// Selections arrive already checked by h5chunk/_selection.py as per-axis items (integers,
// slices of any step, index lists in any order, on any number of axes), all of which the
// library's fast path serves; this layer converts them, runs the read with the GIL released
// straight into the caller's numpy buffer, and turns a Status into the matching Python
// exception.
//
// A long read runs on its own thread while the calling thread waits with the GIL released,
// waking every kPollInterval to report progress and to run Python's signal handlers
// (PyErr_CheckSignals only does anything on the main thread, which is exactly the thread a
// Ctrl-C must reach). A KeyboardInterrupt sets ReadOptions::cancel; the read stops after the
// chunks in flight, and the exception propagates once the read thread has finished with the
// buffer.
//
// Fork: a File or Dataset made before a fork belongs to the process that made it (a file read
// through hubfs holds that process's session and threads). In a forked child it is kept, never
// destroyed (its destructor could join threads or take locks the child does not have), and a
// read of it raises OSError; h5chunk.File reopens itself in the child instead, by path or URL.
#include <hdf5.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "h5chunk/h5chunk.h"

namespace py = pybind11;

namespace {

using hubfs::Code;
using hubfs::Status;

// How often a waiting caller wakes to report progress and check for Ctrl-C: short enough that
// an interrupt feels immediate, long enough that the wake-ups cost nothing next to a read.
constexpr auto kPollInterval = std::chrono::milliseconds(25);
// Without a progress callback, a read runs on the calling thread (with the GIL released) when
// no Ctrl-C can be waiting for it (not the main thread), or when it is this small: a few
// milliseconds' work, where spawning a thread would cost as much as some such reads take. A
// small output is not always a short read (thousands of one-element chunks take seconds to
// locate), hence a bound well under the fast path's 1 MiB threshold.
constexpr size_t kInlineReadBytes = 64u << 10;

enum class Context { kOpenFile, kOpenDataset, kRead };

// The Python exception for a library error. A missing file is FileNotFoundError and a missing
// dataset KeyError, as with h5py; corrupt or unreadable data is OSError (the message names the
// file, dataset and chunk).
[[noreturn]] void raise_status(const Status& s, Context context) {
  PyObject* type = PyExc_OSError;
  switch (s.code()) {
    case Code::kNotFound:
      type = context == Context::kOpenFile ? PyExc_FileNotFoundError : PyExc_KeyError;
      break;
    case Code::kInvalidArgument:
      type = context == Context::kOpenFile      ? PyExc_OSError  // not an HDF5 file
             : context == Context::kOpenDataset ? PyExc_KeyError  // a group, not a dataset
                                                : PyExc_ValueError;
      break;
    case Code::kUnsupported: type = PyExc_TypeError; break;  // a non-numeric dtype
    case Code::kOutOfRange: type = PyExc_IndexError; break;
    case Code::kPermissionDenied: type = PyExc_PermissionError; break;
    case Code::kInternal: type = PyExc_RuntimeError; break;
    default: type = PyExc_OSError; break;
  }
  PyErr_SetString(type, s.message().c_str());
  throw py::error_already_set();
}

// Fallback notes the library logs (from whichever thread read), kept until Python drains them
// into warnings on the calling thread.
struct Notes {
  std::mutex mu;
  std::vector<std::string> lines;
};

// One read running on its own thread.
struct ReadJob {
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> bytes{0};  // compressed bytes of the chunks completed so far
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<hubfs::Result<h5chunk::ReadStats>> result;
};

// The interpreter's main thread: the only one PyErr_CheckSignals runs handlers on.
unsigned long main_thread_ident() {
  static const unsigned long ident = [] {
    py::object threading = py::module_::import("threading");
    return threading.attr("main_thread")().attr("ident").cast<unsigned long>();
  }();
  return ident;
}

h5chunk::Route parse_route(const std::string& route) {
  if (route == "auto") return h5chunk::Route::kAuto;
  if (route == "fast") return h5chunk::Route::kFastPath;
  if (route == "h5dread") return h5chunk::Route::kH5Dread;
  throw py::value_error("route must be 'auto', 'fast' or 'h5dread', not '" + route + "'");
}

// Items (from h5chunk/_selection.py): an int (one index), a (start, stop, step) slice whose stop
// may be None (open), or a 1-D array of indices in any order (repeats allowed). Each selects
// along its own axis.
h5chunk::Selection to_selection(const py::sequence& items) {
  h5chunk::Selection sel;
  for (py::handle item : items) {
    if (py::isinstance<py::int_>(item)) {
      sel.items.push_back(h5chunk::Index::Int(item.cast<int64_t>()));
    } else if (py::isinstance<py::tuple>(item)) {
      auto t = item.cast<py::tuple>();
      if (t.size() != 3) throw py::type_error("a slice item is (start, stop, step)");
      std::optional<int64_t> stop;
      if (!t[1].is_none()) stop = t[1].cast<int64_t>();
      sel.items.push_back(h5chunk::Index::Slice(t[0].cast<int64_t>(), stop, t[2].cast<int64_t>()));
    } else {
      auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(item);
      if (!a || a.ndim() != 1) throw py::type_error("selection items are ints, (start, stop, step) or 1-D int arrays");
      sel.items.push_back(h5chunk::Index::List(std::vector<int64_t>(a.data(), a.data() + a.size())));
    }
  }
  return sel;
}

py::tuple to_tuple(const std::vector<uint64_t>& v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) t[i] = py::int_(v[i]);
  return t;
}

// Files and datasets a forked child's objects held of its parent's (see the top): kept, never
// destroyed. Touched with the GIL held only.
template <typename T>
std::vector<T>& left_by_parent() {
  static auto* kept = new std::vector<T>();
  return *kept;
}

void check_same_process(pid_t owner) {
  if (owner == ::getpid()) return;
  py::object args = py::make_tuple(EBADF, std::string("this h5chunk file was opened in another process (before a "
      "fork); open it again in this process (h5chunk.File and Dataset objects do so on their own)"));
  PyErr_SetObject(PyExc_OSError, args.ptr());
  throw py::error_already_set();
}

class PyDataset {
 public:
  explicit PyDataset(h5chunk::Dataset dataset) : dataset_(std::move(dataset)) {}
  PyDataset(const PyDataset&) = default;
  ~PyDataset() {
    if (pid_ != ::getpid()) left_by_parent<h5chunk::Dataset>().push_back(std::move(dataset_));
  }

  const h5chunk::DatasetInfo& info() const { return dataset_.info(); }

  // on_caller: run the read on the calling thread even on the main thread, for a read the caller
  // knows is short (a frame whose bytes are on local disk: h5chunk.FrameDataset). Handing a
  // read to a thread of its own cost 0.6-0.9 ms of the ~3.2 ms of CPU of a 3 MB frame read warm
  // (docs/benchmarks.md, issue 40, session 27); a Ctrl-C then waits for the read.
  // hint_chunks: h5chunk::ReadOptions::hint_chunks (false: the caller knows the bytes are local).
  h5chunk::ReadStats read_into(const py::sequence& items, const py::array& out, const std::string& route,
                               const py::object& progress, bool on_caller, bool hint_chunks) {
    check_same_process(pid_);
    h5chunk::Selection sel = to_selection(items);
    if (!(out.flags() & py::array::c_style)) throw py::value_error("out must be C-contiguous");
    if (!out.writeable()) throw py::value_error("out must be writeable");
    void* ptr = const_cast<void*>(out.data());
    const size_t nbytes = static_cast<size_t>(out.nbytes());
    h5chunk::ReadOptions options;
    options.route = parse_route(route);
    options.hint_chunks = hint_chunks;

    const bool main_thread = PyThread_get_thread_ident() == main_thread_ident();
    if (progress.is_none() && (on_caller || !main_thread || nbytes < kInlineReadBytes)) {
      std::optional<hubfs::Result<h5chunk::ReadStats>> r;
      {
        py::gil_scoped_release release;
        r.emplace(dataset_.read_into(sel, ptr, nbytes, options));
      }
      if (!r->ok()) raise_status(r->status(), Context::kRead);
      return **r;
    }

    auto job = std::make_shared<ReadJob>();
    options.cancel = &job->cancel;
    options.progress = [job](uint64_t b) { job->bytes.fetch_add(b, std::memory_order_relaxed); };
    h5chunk::Dataset dataset = dataset_;
    std::thread runner([job, dataset, sel = std::move(sel), ptr, nbytes, options] {
      hubfs::Result<h5chunk::ReadStats> r = Status(Code::kInternal, "read did not run");
      try {
        r = dataset.read_into(sel, ptr, nbytes, options);
      } catch (const std::bad_alloc&) {
        r = Status(Code::kInternal, "out of memory during the read");
      } catch (const std::exception& e) {
        r = Status(Code::kInternal, e.what());
      }
      std::lock_guard<std::mutex> lock(job->mu);
      job->result.emplace(std::move(r));
      job->done = true;
      job->cv.notify_all();
    });

    // Whatever happens below, the runner is stopped and joined before `out` can be released
    // (a joinable std::thread left to unwind would also terminate the process).
    struct JoinGuard {
      JoinGuard(ReadJob& j, std::thread& t) : job(j), thread(t) {}
      JoinGuard(const JoinGuard&) = delete;
      ReadJob& job;
      std::thread& thread;
      ~JoinGuard() {
        job.cancel.store(true);
        py::gil_scoped_release release;
        thread.join();
      }
    };
    std::optional<JoinGuard> guard(std::in_place, *job, runner);

    // Wait, with the GIL released between wake-ups. A Python error (Ctrl-C, or the progress
    // callback raising) cancels the read; it is re-raised only after the runner has let go of
    // the buffer.
    std::optional<py::error_already_set> error;
    uint64_t reported = 0;
    for (bool finished = false; !finished;) {
      {
        py::gil_scoped_release release;
        std::unique_lock<std::mutex> lock(job->mu);
        finished = job->cv.wait_for(lock, kPollInterval, [&] { return job->done; });
      }
      if (error) continue;
      const uint64_t now = job->bytes.load(std::memory_order_relaxed);
      if (now > reported && !progress.is_none()) {
        try {
          progress(now - reported);
        } catch (py::error_already_set& e) {
          error.emplace(std::move(e));
        }
        reported = now;
      }
      if (!error && !finished && PyErr_CheckSignals() != 0) error.emplace();
      if (error) job->cancel.store(true);
    }
    guard.reset();  // joins
    if (error) throw std::move(*error);
    if (!job->result->ok()) raise_status(job->result->status(), Context::kRead);
    return **job->result;
  }

  std::vector<uint64_t> selection_shape(const py::sequence& items) const {
    auto r = dataset_.selection_shape(to_selection(items));
    if (!r.ok()) raise_status(r.status(), Context::kRead);
    return *r;
  }

  uint64_t manifest_queries() const { return dataset_.manifest_queries(); }

  std::vector<std::pair<uint64_t, uint64_t>> row_ranges(uint64_t first, uint64_t count) const {
    check_same_process(pid_);
    std::optional<hubfs::Result<std::vector<std::pair<uint64_t, uint64_t>>>> r;
    {
      py::gil_scoped_release release;
      r.emplace(dataset_.row_ranges(first, count));
    }
    if (!r->ok()) raise_status(r->status(), Context::kRead);
    return **r;
  }

 private:
  h5chunk::Dataset dataset_;
  pid_t pid_ = ::getpid();
};

// The capsule hubfs's extension wraps an h5chunk::ByteSource in (hubfs.HubFile's byte_source):
// a heap std::shared_ptr<h5chunk::ByteSource>, built from the same h5chunk/byte_source.h.
constexpr const char* kByteSourceCapsule = "h5chunk.ByteSource.v2";

std::shared_ptr<h5chunk::ByteSource> source_from_capsule(const py::object& capsule) {
  if (!PyCapsule_IsValid(capsule.ptr(), kByteSourceCapsule)) {
    throw py::type_error(std::string("not a ") + kByteSourceCapsule +
                         " capsule (from hubfs.open(...).byte_source()); is hubfs from the same build as h5chunk?");
  }
  return *static_cast<std::shared_ptr<h5chunk::ByteSource>*>(PyCapsule_GetPointer(capsule.ptr(), kByteSourceCapsule));
}

class PyFile {
 public:
  // `target`: a path (str), or a byte source capsule (a file without a path: hf:// in-process).
  PyFile(const py::object& target, unsigned threads, std::optional<uint64_t> min_fast_path_bytes,
         std::optional<uint64_t> max_bytes_in_flight)
      : notes_(std::make_shared<Notes>()) {
    std::shared_ptr<h5chunk::ByteSource> source;
    std::string path;
    if (py::isinstance<py::str>(target)) {
      path = target.cast<std::string>();
    } else {
      source = source_from_capsule(target);
    }
    h5chunk::Options options;
    options.threads = threads;
    if (min_fast_path_bytes) options.min_fast_path_bytes = *min_fast_path_bytes;
    if (max_bytes_in_flight) options.max_bytes_in_flight = *max_bytes_in_flight;
    options.log = [notes = notes_](const std::string& line) {
      std::lock_guard<std::mutex> lock(notes->mu);
      notes->lines.push_back(line);
    };
    std::optional<hubfs::Result<h5chunk::File>> r;
    {
      py::gil_scoped_release release;
      r.emplace(source ? h5chunk::File::open(std::move(source), std::move(options))
                       : h5chunk::File::open(path, std::move(options)));
    }
    if (!r->ok()) raise_status(r->status(), Context::kOpenFile);
    file_.emplace(std::move(**r));
  }
  PyFile(const PyFile&) = delete;
  PyFile& operator=(const PyFile&) = delete;
  ~PyFile() {
    if (file_ && pid_ != ::getpid()) left_by_parent<h5chunk::File>().push_back(std::move(*file_));
  }

  const std::string& path() const { return file_->path(); }
  unsigned threads() const { return file_->threads(); }

  PyDataset dataset(const std::string& name) {
    check_same_process(pid_);
    std::optional<hubfs::Result<h5chunk::Dataset>> r;
    {
      py::gil_scoped_release release;
      r.emplace(file_->dataset(name));
    }
    if (!r->ok()) raise_status(r->status(), Context::kOpenDataset);
    return PyDataset(**r);
  }

  std::vector<std::string> dataset_paths() const {
    check_same_process(pid_);
    auto r = file_->dataset_paths();
    if (!r.ok()) raise_status(r.status(), Context::kOpenFile);
    return *r;
  }

  void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    check_same_process(pid_);
    py::gil_scoped_release release;
    file_->hint(ranges);
  }

  // The fallback notes logged since the last call.
  std::vector<std::string> take_notes() {
    std::lock_guard<std::mutex> lock(notes_->mu);
    return std::exchange(notes_->lines, {});
  }

 private:
  std::optional<h5chunk::File> file_;
  std::shared_ptr<Notes> notes_;
  pid_t pid_ = ::getpid();
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "The h5chunk C++ library (use the h5chunk package, not this module, directly).";
  // No libhdf5 teardown at exit when h5chunk is the first to load libhdf5 (with h5py first, its
  // choice stands): on some damaged files libhdf5's H5Dopen error path keeps an internal
  // reference to the file, and its exit handler then prints "infinite loop closing library".
  // Nothing is written, so there is nothing to flush.
  H5dont_atexit();

  py::class_<h5chunk::ReadStats>(m, "ReadStats", "What one read did.")
      .def(py::init<>())
      .def_readonly("fast_path", &h5chunk::ReadStats::fast_path,
                    "True when h5chunk read and decoded the chunks itself")
      .def_readonly("fallback_cause", &h5chunk::ReadStats::fallback_cause,
                    "Why H5Dread served the read; empty on the fast path")
      .def_readonly("chunks", &h5chunk::ReadStats::chunks, "Chunks the fast path touched")
      .def_readonly("compressed_bytes", &h5chunk::ReadStats::compressed_bytes,
                    "Bytes the fast path read from the file")
      .def_readonly("manifest_queries", &h5chunk::ReadStats::manifest_queries,
                    "HDF5 chunk-location queries the read made")
      .def_readonly("peak_bytes_in_flight", &h5chunk::ReadStats::peak_bytes_in_flight,
                    "Most compressed bytes held at once")
      .def("__repr__", [](const h5chunk::ReadStats& s) {
        return "ReadStats(fast_path=" + std::string(s.fast_path ? "True" : "False") +
               ", chunks=" + std::to_string(s.chunks) + ", compressed_bytes=" +
               std::to_string(s.compressed_bytes) + ", fallback_cause='" + s.fallback_cause + "')";
      });

  py::class_<PyDataset>(m, "Dataset")
      .def_property_readonly("path", [](const PyDataset& d) { return d.info().path; })
      .def_property_readonly("shape", [](const PyDataset& d) { return to_tuple(d.info().shape); })
      .def_property_readonly("numeric", [](const PyDataset& d) { return d.info().numeric; })
      .def_property_readonly("dtype_name", [](const PyDataset& d) -> py::object {
        if (!d.info().numeric) return py::none();
        return py::str(h5chunk::dtype_name(d.info().dtype));
      })
      .def_property_readonly("readable", [](const PyDataset& d) { return d.info().readable; })
      .def_property_readonly("unsupported_type", [](const PyDataset& d) { return d.info().unsupported_type; })
      .def_property_readonly("null_space", [](const PyDataset& d) { return d.info().null_space; })
      .def_property_readonly("refusal", [](const PyDataset& d) { return d.info().refusal; })
      .def_property_readonly("element_kind", [](const PyDataset& d) { return d.info().element.kind; })
      .def_property_readonly("element_size", [](const PyDataset& d) { return d.info().element.size; })
      // numpy dtypes as Python literals (ElementType): the returned elements, and h5py's dtype.
      .def_property_readonly("numpy_descr", [](const PyDataset& d) { return d.info().element.numpy; })
      .def_property_readonly("numpy_stored_descr",
                             [](const PyDataset& d) { return d.info().element.numpy_stored; })
      .def_property_readonly("big_endian", [](const PyDataset& d) { return d.info().big_endian; })
      .def_property_readonly("type_text", [](const PyDataset& d) { return d.info().type_text; })
      .def_property_readonly("layout", [](const PyDataset& d) { return d.info().layout; })
      .def_property_readonly("chunk", [](const PyDataset& d) -> py::object {
        if (d.info().chunk.empty()) return py::none();
        return to_tuple(d.info().chunk);
      })
      .def_property_readonly("filters", [](const PyDataset& d) {
        py::list out;
        for (const auto& f : d.info().filters) {
          py::dict step;
          step["id"] = f.id;
          step["name"] = f.name;
          step["flags"] = f.flags;
          step["cd_values"] = py::tuple(py::cast(f.cd_values));
          out.append(step);
        }
        return out;
      })
      .def_property_readonly("nbytes", [](const PyDataset& d) { return d.info().nbytes; })
      .def_property_readonly("fast_path_blocker", [](const PyDataset& d) { return d.info().fast_path_blocker; })
      .def_property_readonly("fix", [](const PyDataset& d) { return d.info().fix; })
      .def_property_readonly("missing_sources", [](const PyDataset& d) { return d.info().missing_sources; })
      .def("read_into", &PyDataset::read_into, py::arg("items"), py::arg("out"), py::arg("route") = "auto",
           py::arg("progress") = py::none(), py::arg("on_caller") = false, py::arg("hint_chunks") = true)
      .def("selection_shape", &PyDataset::selection_shape, py::arg("items"))
      .def_property_readonly("manifest_queries", &PyDataset::manifest_queries)
      .def("row_ranges", &PyDataset::row_ranges, py::arg("first"), py::arg("count"),
           "The file's byte ranges (offset, length) holding rows [first, first + count) along axis 0");

  py::class_<PyFile>(m, "File")
      .def(py::init<const py::object&, unsigned, std::optional<uint64_t>, std::optional<uint64_t>>(),
           py::arg("path"), py::arg("threads") = 0, py::arg("min_fast_path_bytes") = py::none(),
           py::arg("max_bytes_in_flight") = py::none())
      .def_property_readonly("path", &PyFile::path)
      .def_property_readonly("threads", &PyFile::threads)
      .def("dataset", &PyFile::dataset, py::arg("name"))
      .def("dataset_paths", &PyFile::dataset_paths)
      .def("take_notes", &PyFile::take_notes)
      .def("hint", &PyFile::hint, py::arg("ranges"),
           "Fetches these (offset, length) ranges ahead of reads (hf:// and hubfs mounts; elsewhere nothing)");

  m.attr("DEFAULT_MIN_FAST_PATH_BYTES") = h5chunk::kDefaultMinFastPathBytes;
  m.attr("DEFAULT_MAX_BYTES_IN_FLIGHT") = h5chunk::kDefaultMaxBytesInFlight;
}
