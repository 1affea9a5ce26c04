// Worker states, the process's pools of idle buffers, and the reads and hints that go through a
// worker's descriptor or source (worker_state.h).
#include "h5chunk/worker_state.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "h5chunk/range_hints.h"

namespace h5chunk {

using hubfs::Corrupt;
using hubfs::IoError;

WorkerState::~WorkerState() {
  if (fd >= 0) ::close(fd);
}

Buffer BufferPool::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.empty()) return Buffer();
  Buffer buffer = std::move(idle_.back());
  idle_.pop_back();
  bytes_ -= buffer.capacity();
  return buffer;
}

void BufferPool::give(Buffer buffer) {
  if (buffer.capacity() == 0 || buffer.capacity() > kRetainedBufferBytes) return;  // freed here
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes_ + buffer.capacity() > cap_) return;  // freed as the call returns
  bytes_ += buffer.capacity();
  idle_.push_back(std::move(buffer));
}

size_t BufferPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t BufferPool::kept_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

// Never destroyed: a worker may release its state while the process exits.
BufferPool& compressed_buffers() {
  static BufferPool* pool = new BufferPool(kPooledBufferBytes);
  return *pool;
}

BufferPool& chunk_buffers() {
  static BufferPool* pool = new BufferPool(kPooledBufferBytes);
  return *pool;
}

namespace {

[[maybe_unused]] const int g_pool_fork_handlers = pthread_atfork(
    [] {
      compressed_buffers().lock_for_fork();
      chunk_buffers().lock_for_fork();
    },
    [] {
      chunk_buffers().unlock_after_fork();
      compressed_buffers().unlock_after_fork();
    },
    [] {
      chunk_buffers().unlock_after_fork();
      compressed_buffers().unlock_after_fork();
    });

// A state about to work gets the process's idle buffers (if it has none of its own).
std::unique_ptr<WorkerState> with_pooled_buffers(std::unique_ptr<WorkerState> state) {
  if (state->compressed.capacity() == 0) state->compressed = compressed_buffers().take();
  if (state->chunk.capacity() == 0) state->chunk = chunk_buffers().take();
  return state;
}

}  // namespace

Result<std::unique_ptr<WorkerState>> WorkerStatePool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto state = std::move(idle_.back());
      idle_.pop_back();
      return with_pooled_buffers(std::move(state));
    }
  }
  auto state = std::make_unique<WorkerState>();
  if (source_) {
    state->source = source_;
    return with_pooled_buffers(std::move(state));
  }
  state->fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (state->fd < 0) return IoError("cannot open '" + path_ + "': " + std::strerror(errno));
  // Reads are whole chunks at known offsets (announced ahead with WILLNEED or a range hint):
  // the kernel's own read-ahead past them would only fetch bytes nobody asked for.
  ::posix_fadvise(state->fd, 0, 0, POSIX_FADV_RANDOM);
  return with_pooled_buffers(std::move(state));
}

void WorkerStatePool::release(std::unique_ptr<WorkerState> state) {
  compressed_buffers().give(std::move(state->compressed));
  chunk_buffers().give(std::move(state->chunk));
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(state));
}

Status read_exact(WorkerState& worker, uint8_t* buf, uint64_t size, uint64_t offset,
                  const std::atomic<bool>* cancel) {
  uint64_t done = 0;
  while (done < size) {
    uint64_t n = 0;
    if (worker.source) {
      auto r = worker.source->pread(buf + done, offset + done, size - done, cancel);
      if (!r.ok()) return r.status();
      n = *r;
    } else {
      ssize_t got = ::pread(worker.fd, buf + done, size - done, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        return IoError(std::string("read failed: ") + std::strerror(errno));
      }
      n = static_cast<uint64_t>(got);
    }
    if (n == 0) {
      return Corrupt("file truncated: " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                     " end after " + std::to_string(done));
    }
    done += n;
  }
  return Status::Ok();
}

Result<uint64_t> file_size(const WorkerState& worker) {
  if (worker.source) return worker.source->size();
  struct stat st;
  if (::fstat(worker.fd, &st) != 0) return IoError(std::string("cannot stat the file: ") + std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

bool hint_ranges(const WorkerState& worker, uint64_t file_size,
                 const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  if (!worker.source) return send_range_hints(worker.fd, file_size, ranges);
  std::vector<std::pair<uint64_t, uint64_t>> inside;
  for (auto [offset, length] : ranges) {
    if (length > 0 && offset < file_size && length <= file_size - offset) inside.emplace_back(offset, length);
  }
  if (!inside.empty()) worker.source->hint(inside);
  return true;
}

}  // namespace h5chunk
