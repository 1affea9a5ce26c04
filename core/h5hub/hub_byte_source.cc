#include "h5hub/hub_byte_source.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace hubfs {

namespace {

// How often a cancellable read looks at its cancel flag: an interrupt feels immediate, and the
// wake-ups cost nothing next to a network read.
constexpr auto kCancelPoll = std::chrono::milliseconds(25);

// A read handed to a helper thread: the blocks it collects, and whether it is done.
struct PendingRead {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::vector<BlockBytes> slices;
};

}  // namespace

HubByteSource::HubByteSource(std::shared_ptr<HubFile> file, std::string name)
    : file_(std::move(file)), name_(std::move(name)) {
  const std::string suffix = "/" + file_->path();
  if (name_.size() > suffix.size() && name_.compare(name_.size() - suffix.size(), suffix.size(), suffix) == 0) {
    tree_ = std::make_shared<HubFileTree>(file_->session(), name_.substr(0, name_.size() - suffix.size()));
  }
}

Result<std::shared_ptr<h5chunk::ByteSource>> HubFileTree::open(const std::string& path) {
  auto file = HubFile::open(session_, path);
  if (!file.ok()) return file.status();
  return std::shared_ptr<h5chunk::ByteSource>(std::make_shared<HubByteSource>(
      std::shared_ptr<HubFile>(std::move(file).value()), name_ + "/" + path, shared_from_this()));
}

Result<size_t> HubByteSource::pread(void* dst, uint64_t offset, size_t len, const std::atomic<bool>* cancel) {
  // Without the network nothing waits long enough to need cancelling: on this thread
  // (h5hub/local_reads.h).
  if (!cancel || reads_locally(*file_, offset, len, recent_.get())) {
    auto r = file_->pread(dst, offset, len);
    if (!r.ok()) return r.status().with_context("reading " + name_);
    recent_.served(*file_, offset, *r);
    return r;
  }
  auto pending = std::make_shared<PendingRead>();
  {
    std::lock_guard<std::mutex> lock(helpers_->mu);
    ++helpers_->running;
  }
  std::thread([pending, helpers = helpers_, file = file_, offset, len]() mutable {
    std::vector<BlockBytes> all;
    Status status;
    size_t got = 0;
    while (got < len) {  // HubFile::read serves at most 16 MiB per call
      auto r = file->read(offset + got, len - got);
      if (!r.ok()) {
        status = r.status();
        break;
      }
      if (r->empty()) break;
      for (auto& b : *r) {
        got += b.size();
        all.push_back(std::move(b));
      }
    }
    file.reset();  // before counting out: the destructor may then drop the last reference
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      pending->status = std::move(status);
      pending->slices = std::move(all);
      pending->done = true;
      pending->cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(helpers->mu);
    --helpers->running;
    helpers->cv.notify_all();
  }).detach();
  const MonotonicClock& clock = file_->session()->stack.env->clock();
  std::unique_lock<std::mutex> lock(pending->mu);
  while (!Deadline::after(kCancelPoll, clock).wait(pending->cv, lock, [&] { return pending->done; })) {
    if (cancel->load()) return Unavailable("reading " + name_ + ": read cancelled");
  }
  if (!pending->status.ok()) return pending->status.with_context("reading " + name_);
  size_t copied = 0;
  for (const BlockBytes& b : pending->slices) {
    const size_t n = std::min(b.size(), len - copied);
    std::memcpy(static_cast<char*>(dst) + copied, b.data(), n);
    copied += n;
  }
  recent_.served(*file_, offset, copied);
  return copied;
}

HubByteSource::~HubByteSource() {
  std::unique_lock<std::mutex> lock(helpers_->mu);
  helpers_->cv.wait(lock, [this] { return helpers_->running == 0; });
}

void HubByteSource::hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::vector<ByteRange> wanted;
  wanted.reserve(ranges.size());
  for (const auto& [offset, length] : ranges) wanted.push_back({offset, length});
  (void)file_->hint(wanted);  // best effort: the reads fetch whatever the hint did not
}

Result<std::shared_ptr<HubByteSource>> open_hf_source(const std::string& url, const SessionConfig& config, Env& env,
                                                      std::optional<std::string> revision) {
  auto parsed = parse_hf_url(url, std::move(revision));
  if (!parsed.ok()) return parsed.status();
  if (parsed->path.empty()) return InvalidArgument(url + " names a repo, not a file in it");
  auto session = std::make_shared<RepoSession>(env);
  // h5chunk reads the file's header first: from the bridge location the probe names, when the
  // file is on Xet (SessionConfig::xet_head_from_probe).
  SessionConfig one_file = config;
  one_file.xet_head_from_probe = true;
  if (Status st = open_repo_session(one_file, RepoSpec{parsed->repo, ""}, *session, {}, parsed->path); !st.ok())
    return st;
  auto file = HubFile::open(session, parsed->path);
  if (!file.ok()) return file.status();
  return std::make_shared<HubByteSource>(std::shared_ptr<HubFile>(std::move(file).value()), url);
}

}  // namespace hubfs
