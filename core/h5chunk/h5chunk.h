// h5chunk: reads HDF5 datasets fast by reading and decoding their chunks itself, in parallel,
// straight into the caller's array. The HDF5 C library supplies the chunk manifest; anything the
// fast path does not fully understand (layout, codec, selection, a type conversion other than
// byte order) is read with H5Dread instead, so a read's result always equals H5Dread's.
//
//   auto file = h5chunk::File::open("scan.hdf5");
//   auto dset = file->dataset("/data/raw_data");
//   auto array = dset->read("0:4");            // numpy syntax
//   dset->read_into(selection, buffer, bytes); // or into your own buffer
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "h5chunk/byte_source.h"
#include "h5chunk/filters.h"
#include "h5chunk/selection.h"

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

// Plain numeric element types, named as numpy names them.
enum class DType { kInt8, kUInt8, kInt16, kUInt16, kInt32, kUInt32, kInt64, kUInt64, kFloat32, kFloat64 };
const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

// Any fixed-size element type h5chunk reads: plain numbers (DType), float16, bool, enums (read
// as their base integer), complex numbers (h5py's compound of 'r' and 'i'), compound records,
// fixed-length strings, opaque bytes and arrays of these, described the way h5py describes them
// to numpy. Elements are returned in native (little-endian) byte order, converted as H5Dread
// converts them to the type h5py asks for.
struct ElementType {
  size_t size = 0;           // bytes per element
  std::string kind;          // "int", "uint", "float", "bool", "enum", "complex", "compound",
                             // "string", "opaque", "bitfield" or "array"
  // numpy dtypes as Python literals (np.dtype(ast.literal_eval(s))): `numpy` describes the
  // returned elements (native order), `numpy_stored` the dtype h5py gives the dataset (byte
  // order as stored; h5py returns big-endian data as stored). E.g. "'<f4'", "'|S8'",
  // "{'names': ['a', 'b'], 'formats': ['<i4', '<f8'], 'offsets': [0, 8], 'itemsize': 16}".
  std::string numpy;
  std::string numpy_stored;
};

// Receives one human-readable line (the fallback notes). Default: stderr.
using LogFn = std::function<void(const std::string& message)>;
// Called with each chunk's compressed size as the chunk completes, from worker threads.
using ProgressFn = std::function<void(uint64_t compressed_bytes)>;

// Reads smaller than this go to H5Dread: up to one chunk there is nothing to parallelise and
// H5Dread's whole-chunk path is lean, so h5chunk wins only from about two chunks up
// (docs/constants.md, kDefaultMinFastPathBytes). Datasets whose filters H5Dread has no plugin
// for ignore it.
inline constexpr uint64_t kDefaultMinFastPathBytes = 1ull << 20;
// Ceiling on compressed bytes read but not yet decoded. Bounded in bytes, not chunks, because
// chunk sizes vary by orders of magnitude between files (kilobytes to 166 MB).
inline constexpr uint64_t kDefaultMaxBytesInFlight = 512ull << 20;
// Upper bound on default workers: decoding is memory-bandwidth bound well before 16 cores.
inline constexpr unsigned kMaxDefaultThreads = 16;

struct Options {
  unsigned threads = 0;  // workers per read; 0 = min(16, cores), or 1 for chunks under 16 KiB
  uint64_t min_fast_path_bytes = kDefaultMinFastPathBytes;
  uint64_t max_bytes_in_flight = kDefaultMaxBytesInFlight;
  LogFn log;  // fallback notes; empty = stderr
};

enum class Route {
  kAuto,      // fast path when possible and the read is large enough
  kFastPath,  // fast path whenever possible, whatever the size (tests, benchmarks)
  kH5Dread,   // always H5Dread (the reference)
  kFastOnly,  // fast path whatever the size, else kUnsupported naming why not and the fix
};

struct ReadOptions {
  ProgressFn progress;
  Route route = Route::kAuto;
  // Set to true from any thread to stop a fast-path read early (the Python binding's Ctrl-C):
  // no further chunk is started and the read returns kUnavailable "read cancelled" once the
  // chunks in progress finish, leaving the output partly written. H5Dread fallbacks cannot be
  // interrupted and run to completion.
  const std::atomic<bool>* cancel = nullptr;
  // Announce the read's chunks to a source that takes range hints (hf://) or to a hubfs mount
  // before reading them. False where the caller knows the bytes are already local (a
  // FrameDataset frame whose blocks are all in hubfs's disk cache): the hint then only hands the
  // blocks' disk loads to the reader's threads while this one waits for them, a third of such a
  // frame's CPU (docs/benchmarks.md, session 37).
  bool hint_chunks = true;
  // Where an H5Dread that libhdf5 might crash on is run instead of in this process (the h5chunk
  // command's helper process: tools/h5chunk_main.cc). Called, when set, for every H5Dread
  // Dataset::h5dread_hazard() names a hazard for, after h5chunk's own checks of the chunks passed.
  // It fills `out` (`bytes`, zeroed) with `selection` read by H5Dread, or fails naming why;
  // `hazard` is the hazard, for its messages.
  std::function<Status(const Selection& selection, void* out, size_t bytes, const std::string& hazard)>
      isolated_h5dread;
};

struct ReadStats {
  bool fast_path = false;
  std::string fallback_cause;     // why H5Dread served the read; empty on the fast path
  uint64_t chunks = 0;            // chunks the fast path touched
  uint64_t compressed_bytes = 0;  // bytes it read from the file
  uint64_t manifest_queries = 0;  // HDF5 chunk queries it made (memo misses)
  uint64_t peak_bytes_in_flight = 0;  // most compressed bytes held at once (<= the limit, or one chunk)
  uint64_t prefaulted_bytes = 0;  // output bytes mapped ahead of the decoders (a large hinted read)
};

// A read's result: C-order elements (element_size() bytes each; of `dtype` for plain numbers),
// native byte order.
class Array {
 public:
  Array() = default;
  // Uninitialised storage. Throws std::bad_alloc when it cannot be had; allocate() says why
  // instead, and read() uses it.
  Array(std::vector<uint64_t> shape, DType dtype);
  // Elements of any type (`type_name` only names it in errors); dtype() is then kUInt8 unless
  // the element is a plain number, and element_size() is what counts.
  static Result<Array> allocate(std::vector<uint64_t> shape, size_t element_size,
                                const std::string& type_name, std::optional<DType> dtype = {});
  // Uninitialised storage, or kInvalidArgument ("array is too big") when the byte count
  // overflows, exceeds this machine's memory and swap, or malloc refuses it. The message names
  // the shape, the dtype and the bytes asked for.
  static Result<Array> allocate(std::vector<uint64_t> shape, DType dtype);
  const std::vector<uint64_t>& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  size_t element_size() const { return elem_size_; }
  uint64_t num_elements() const;
  size_t nbytes() const { return nbytes_; }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  template <typename T> const T* as() const { return reinterpret_cast<const T*>(data_.get()); }
  ReadStats stats;

 private:
  std::vector<uint64_t> shape_;
  DType dtype_ = DType::kUInt8;
  size_t elem_size_ = 1;
  size_t nbytes_ = 0;
  // Not a std::vector: that would zero every byte first, doubling the first-touch cost.
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
};

// What a dataset is and whether the fast path can read it.
struct DatasetInfo {
  std::string path;
  std::vector<uint64_t> shape;
  bool numeric = false;        // a plain numeric dtype that DType names
  bool readable = false;       // reads are possible: a fixed-size type, not a null dataspace, not corrupt
  bool null_space = false;     // a null dataspace: no elements at all (h5py returns h5py.Empty)
  std::string refusal;         // why every read is refused, with the fix; empty when readable
  DType dtype = DType::kUInt8; // valid when numeric
  ElementType element;         // every readable type (numpy empty when not readable)
  std::string unsupported_type;  // why the dtype cannot be returned ("variable-length string",
                                 // "object or region reference"); empty for fixed-size types
  std::string type_text;       // "float32", "compound (16 bytes)", ...
  bool big_endian = false;     // stored big-endian (reads still return native order)
  std::string layout;          // "chunked", "contiguous", "compact", "virtual"
  std::vector<uint64_t> chunk; // chunk shape; empty unless chunked
  std::vector<FilterStep> filters;
  uint64_t nbytes = 0;         // uncompressed size; UINT64_MAX when that overflows (a corrupt shape)
  std::string fast_path_blocker;  // empty when parallel reads are possible (chunked or contiguous), else why not
  std::string fix;                // what would remove the blocker
  // A virtual dataset of a local file: its sources ("FILE:/DATASET (why)") libhdf5 will not
  // find, and so reads as fill values (external_files.h). Over hf:// these are refused instead.
  std::vector<std::string> missing_sources;
};

class FileState;
class DatasetState;

class Dataset {
 public:
  const DatasetInfo& info() const;

  // Output shape of `selection` (errors as read() would give them).
  Result<std::vector<uint64_t>> selection_shape(const Selection& selection) const;

  Result<Array> read(const Selection& selection = {}, const ReadOptions& options = {}) const;
  Result<Array> read(std::string_view selection, const ReadOptions& options = {}) const;

  // Reads into `out`, which must hold exactly the selection's bytes (selection_shape x dtype
  // size). On error the buffer's contents are unspecified.
  Result<ReadStats> read_into(const Selection& selection, void* out, size_t out_bytes,
                              const ReadOptions& options = {}) const;
  // Why an H5Dread of this dataset on `route` could crash libhdf5 on a damaged file, though
  // h5chunk's checks passed; empty when h5chunk checked everything H5Dread will decode.
  // ReadOptions::isolated_h5dread runs such reads elsewhere. The rule: a pipeline with
  // scale-offset or n-bit (libhdf5 decodes them trusting the chunk, and filter_checks.h checks
  // only what can be checked without decoding), a filtered dataset whose chunks h5chunk does not
  // decode and check before H5Dread (a filter it lacks, a dataset in another file, or Route::kH5Dread,
  // which checks nothing), and a virtual dataset (its sources are read unchecked).
  std::string h5dread_hazard(Route route) const;

  // HDF5 chunk queries made for this dataset so far, over all reads.
  uint64_t manifest_queries() const;

  // The file's byte ranges (offset, length) holding rows [first, first + count) along axis 0:
  // the stored chunks they touch (never-written chunks have none), or a contiguous dataset's
  // span; empty for other layouts. For hints ahead of reads (File::hint): no data is read.
  Result<std::vector<std::pair<uint64_t, uint64_t>>> row_ranges(uint64_t first, uint64_t count) const;

 private:
  Result<ReadStats> read_into_unmapped(const Selection& selection, void* out, size_t out_bytes,
                                       const ReadOptions& options) const;
  // External raw storage of a file read through a source, read through its tree.
  Result<ReadStats> read_external(const NormalizedSelection& selection, void* out, const ReadOptions& options,
                                  const std::string& source) const;
  friend class File;
  std::shared_ptr<FileState> file_;
  std::shared_ptr<DatasetState> state_;
};

class File {
 public:
  // Opens a local file (or one on a mount) read-only.
  static Result<File> open(const std::string& path, Options options = {});
  // Opens a file that has no local path (an hf:// file read in-process: core/h5hub) read-only.
  // libhdf5 reads its metadata through `source` (source_driver.h), the fast path reads its
  // chunks through it, and every read's chunk list goes to source->hint() at once. path() is
  // source->name(). A read through the source that fails fails the call with the source's
  // own error (its code and message: a timeout, a token the Hub refused).
  static Result<File> open(std::shared_ptr<ByteSource> source, Options options = {});

  const std::string& path() const;
  // The dataset at `path` ("/data/raw_data" or "data/raw_data"). Handles to the same dataset
  // share one remembered chunk manifest.
  Result<Dataset> dataset(const std::string& path) const;
  // Workers per read (Options::threads, or its default).
  unsigned threads() const;
  // Paths of every dataset in the file, in HDF5's traversal order.
  Result<std::vector<std::string>> dataset_paths() const;
  // Tells the file's source that these ranges will be read soon, so they are fetched at once:
  // an hf:// source (ByteSource::hint) or a hubfs mount (its range hint); elsewhere nothing.
  void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) const;

 private:
  std::shared_ptr<FileState> state_;
};

}  // namespace h5chunk
