#include "status.h"

#include "metrics.h"

#include <sys/xattr.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_admin.h"
#include "fs/filesystem.h"
#include "mountpoint.h"

namespace hubfs {
namespace {

// A mount whose daemon is stopped (SIGSTOP, a debugger) never answers: give up after this.
constexpr auto kStatusAnswerTimeout = std::chrono::seconds(3);

struct Probe {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int err = 0;
  std::string value;
};

// getxattr on its own thread, so a daemon that never answers costs kStatusAnswerTimeout, not a hang.
// A thread still blocked then is left behind (it ends with the process).
std::shared_ptr<Probe> read_status_xattr(const std::string& mountpoint) {
  auto probe = std::make_shared<Probe>();
  std::thread([probe, mountpoint] {
    std::string buf(1 << 20, '\0');
    ssize_t n = getxattr(mountpoint.c_str(), kStatusXattr, buf.data(), buf.size());
    std::lock_guard<std::mutex> lock(probe->mu);
    if (n < 0) {
      probe->err = errno;
    } else {
      buf.resize(static_cast<size_t>(n));
      probe->value = std::move(buf);
    }
    probe->done = true;
    probe->cv.notify_all();
  }).detach();
  return probe;
}

nlohmann::json probe_mount(const HubfsMountEntry& m) {
  nlohmann::json j;
  auto probe = read_status_xattr(m.mountpoint);
  std::unique_lock<std::mutex> lock(probe->mu);
  const bool answered = probe->cv.wait_for(lock, kStatusAnswerTimeout, [&] { return probe->done; });
  std::string state, error;
  if (!answered) {
    state = "not responding";
    error = "no answer within " + std::to_string(kStatusAnswerTimeout.count()) + " s (daemon stopped?)";
  } else if (probe->err == ENOTCONN || probe->err == ECONNABORTED) {
    state = "dead";
    error = "its daemon is gone; clear it with: hubfs unmount " + m.mountpoint;
  } else if (probe->err != 0) {
    state = "unknown";
    error = std::string("reading ") + kStatusXattr + ": " + strerror(probe->err) +
            (probe->err == ENODATA ? " (a hubfs daemon older than `hubfs status`?)" : "");
  } else {
    j = nlohmann::json::parse(probe->value, nullptr, false);
    if (!j.is_object()) {
      j = nlohmann::json::object();
      state = "unknown";
      error = std::string(kStatusXattr) + " is not a JSON object";
    } else {
      state = "alive";
    }
  }
  if (state != "alive") {
    // The fields every entry has, null when unknown.
    std::string repo = m.source.rfind("hubfs:", 0) == 0 ? m.source.substr(6) : m.source;
    j = {{"repo", repo},       {"revision", nullptr},      {"commit", nullptr},
         {"requests", nullptr}, {"bytes_fetched", nullptr}, {"in_flight", nullptr}};
    j["error"] = error;
  }
  j["mountpoint"] = m.mountpoint;
  j["state"] = state;
  return j;
}

std::string text_or_dash(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  return "-";
}

std::string uptime_text(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  auto s = v.get<uint64_t>();
  std::ostringstream out;
  if (s >= 86400) out << s / 86400 << "d";
  if (s >= 3600) out << (s / 3600) % 24 << "h";
  if (s >= 60) out << (s / 60) % 60 << "m";
  out << s % 60 << "s";
  return out.str();
}

std::string bytes_text(const nlohmann::json& v) {
  return v.is_number() ? cache_admin::human_bytes(v.get<uint64_t>()) : "-";
}

// One line per mount with a shared block tier, under the table: its servers and counters.
void print_shared_cache(const nlohmann::json& m) {
  const nlohmann::json sc = m.value("shared_cache", nlohmann::json());
  if (!sc.is_object()) return;
  std::string servers;
  for (const auto& s : sc.value("servers", nlohmann::json::array())) servers += (servers.empty() ? "" : ",") + text_or_dash(s);
  std::cout << text_or_dash(m["mountpoint"]) << ": shared cache " << servers << ": ";
  if (!sc.value("enabled", false)) {
    std::cout << "not used (private or gated repo; --shared-cache-private shares it)\n";
    return;
  }
  auto num = [&](const char* key) { return text_or_dash(sc.value(key, nlohmann::json())); };
  std::cout << num("hits") << " hits, " << num("misses") << " misses, " << num("errors") << " errors, "
            << bytes_text(sc.value("bytes_read", nlohmann::json())) << " read, "
            << bytes_text(sc.value("bytes_written", nlohmann::json())) << " written, " << num("corrupt")
            << " corrupt, " << num("dropped") << " dropped, nodes down " << num("nodes_down") << "/"
            << num("nodes") << "\n";
}

// One line per mount under the table: the Hub's quota buckets as last announced (remaining of
// the quota, when the window resets), requests waiting for one and until when, and the API
// calls and resolves made; also whether the repo is gated and which token is in use.
void print_hub_quotas(const nlohmann::json& m) {
  if (!m.contains("api_calls")) return;
  auto num = [](const nlohmann::json& o, const char* key) {
    const nlohmann::json v = o.value(key, nlohmann::json());
    return v.is_number_integer() && v.get<int64_t>() >= 0 ? std::to_string(v.get<int64_t>()) : std::string("?");
  };
  std::cout << text_or_dash(m["mountpoint"]) << ": " << num(m, "api_calls") << " API calls, " << num(m, "resolves")
            << " resolves";
  // A named copy: items() of a temporary would dangle in the loop (the range-for keeps only the
  // outermost temporary alive).
  const nlohmann::json quotas = m.value("quotas", nlohmann::json::object());
  for (const auto& [name, q] : quotas.items()) {
    std::cout << "; " << name << " quota " << num(q, "remaining") << "/" << num(q, "quota") << " left, resets in "
              << num(q, "resets_in_s") << " s, " << num(q, "rate_limited") << " refused (429)";
    if (q.value("waiting", 0) > 0)
      std::cout << ", " << num(q, "waiting") << " waiting until +" << num(q, "waiting_until_s") << " s";
  }
  if (m.value("gated", false)) std::cout << "; gated repo";
  const std::string token = m.value("token", std::string());
  std::cout << "; token: " << (token.empty() ? "none" : token) << "\n";
}

// --follow: what the mount follows, the commit it shows and when the Hub was last asked.
void print_follow(const nlohmann::json& m) {
  if (!m.contains("follow") || !m["follow"].is_object()) return;
  const nlohmann::json& f = m["follow"];
  std::string checked = "not yet";
  if (f.value("checked_at", nlohmann::json()).is_number()) {
    const time_t t = f["checked_at"].get<int64_t>();
    char when[32] = "?";
    struct tm tm {};
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    checked = when;
  }
  std::cout << m["mountpoint"].get<std::string>() << ": follows " << text_or_dash(m.value("revision", nlohmann::json()))
            << " every " << text_or_dash(f.value("interval_s", nlohmann::json())) << " s; at commit "
            << text_or_dash(m.value("commit", nlohmann::json())) << ", last checked " << checked << " ("
            << text_or_dash(f.value("changes", nlohmann::json())) << " new commits)";
  if (f.value("last_error", nlohmann::json()).is_string())
    std::cout << "; the last check failed: " << f["last_error"].get<std::string>();
  std::cout << "\n";
}

void print_table(const nlohmann::json& mounts) {
  std::vector<std::vector<std::string>> rows = {{"MOUNTPOINT", "STATE", "REPO", "REVISION", "COMMIT", "UPTIME",
                                                 "REQUESTS", "FETCHED", "IN-FLIGHT", "HITS MEM/DISK", "RETRIES",
                                                 "ERRORS", "HEDGES", "READ-AHEAD", "UNREAD", "HINTED"}};
  for (const auto& m : mounts) {
    std::string repo = text_or_dash(m.value("repo", nlohmann::json()));
    if (m.contains("subfolder") && m["subfolder"].is_string() && !m["subfolder"].get<std::string>().empty())
      repo += "/" + m["subfolder"].get<std::string>();
    std::string commit = text_or_dash(m.value("commit", nlohmann::json()));
    if (commit.size() > 12) commit.resize(12);
    auto num = [&](const char* key) { return text_or_dash(m.value(key, nlohmann::json())); };
    std::string hits = m.value("memory_hits", nlohmann::json()).is_number()
                           ? num("memory_hits") + "/" + num("disk_hits")
                           : "-";
    rows.push_back({text_or_dash(m["mountpoint"]), text_or_dash(m["state"]), repo, num("revision"), commit,
                    uptime_text(m.value("uptime_s", nlohmann::json())), num("requests"),
                    bytes_text(m.value("bytes_fetched", nlohmann::json())), num("in_flight"), hits, num("retries"),
                    num("errors"), num("hedges"), bytes_text(m.value("read_ahead_bytes", nlohmann::json())),
                    bytes_text(m.value("read_ahead_unread_bytes", nlohmann::json())),
                    bytes_text(m.value("hinted_bytes", nlohmann::json()))});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
  for (const auto& m : mounts)
    if (m.contains("error")) std::cout << m["mountpoint"].get<std::string>() << ": " << m["error"].get<std::string>() << "\n";
  for (const auto& m : mounts) print_follow(m);
  for (const auto& m : mounts) print_shared_cache(m);
  for (const auto& m : mounts) print_hub_quotas(m);
}

}  // namespace

int run_status(const std::string& mountpoint, bool json, bool prometheus) {
  std::vector<HubfsMountEntry> mounts = list_hubfs_mounts();
  if (!mountpoint.empty()) {
    // The path as given first: resolving it stats the mount, which a stopped daemon never answers.
    std::string wanted = mountpoint;
    while (wanted.size() > 1 && wanted.back() == '/') wanted.pop_back();
    bool listed = false;
    for (const auto& m : mounts) listed = listed || m.mountpoint == wanted;
    if (!listed) wanted = absolute_mountpoint(mountpoint);
    std::vector<HubfsMountEntry> one;
    for (const auto& m : mounts)
      if (m.mountpoint == wanted) one = {m};  // the last mounted there is the one seen
    if (one.empty()) {
      std::cerr << "hubfs: " << mountpoint << " is not a hubfs mount (see `hubfs status` for all of them)\n";
      return 1;
    }
    mounts = one;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& m : mounts) list.push_back(probe_mount(m));
  if (prometheus) {
    std::vector<nlohmann::json> alive;
    for (const auto& m : list)
      if (m["state"] == "alive") alive.push_back(m);
    std::cout << prometheus_text(alive);
  } else if (json) {
    std::cout << list.dump(2) << "\n";
  } else if (list.empty()) {
    std::cout << "no hubfs mounts\n";
  } else {
    print_table(list);
  }
  if (!mountpoint.empty() && list[0]["state"] != "alive") return 1;
  return 0;
}

}  // namespace hubfs
