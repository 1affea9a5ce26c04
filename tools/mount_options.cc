#include "mount_options.h"

#include "fs/follow.h"
#include "shared/memcached/memcached_store.h"

namespace hubfs {
namespace {

using Value = MountValue;

bool parse_int_in(const std::string& text, int lo, int hi, int& out) {
  try {
    size_t used = 0;
    const long v = std::stol(text, &used);
    if (used != text.size() || v < lo || v > hi) return false;
    out = static_cast<int>(v);
    return true;
  } catch (...) {
    return false;
  }
}

// Setters of the common shapes.
template <auto field>  // a std::string or std::optional<std::string> member of MountConfig
std::string text(MountArgs& a, const Value& v) {
  if (!v) return "needs a value";
  a.config.*field = *v;
  return "";
}
template <auto field>  // a bool member
std::string flag(MountArgs& a, const Value& v) {
  if (v) return "takes no value";
  a.config.*field = true;
  return "";
}
// An int field of SessionConfig or MountConfig, within [lo, hi].
template <int lo, int hi>
std::string number(int& field, const Value& v, const char* unit) {
  if (!v || !parse_int_in(*v, lo, hi, field))
    return std::string("give ") + unit + " from " + std::to_string(lo) + " to " + std::to_string(hi);
  return "";
}

}  // namespace

const std::vector<MountOption>& mount_options() {
  static const std::vector<MountOption> kOptions = {
      {"--hub", "",
       "Mount the whole Hub at MOUNTPOINT (hubfs mount --hub MNT): MNT/datasets/ORG/NAME/..., "
       "MNT/models/ORG/NAME/... and .../NAME@REV/... are pinned when first touched; a directory "
       "lists only the repos touched so far",
       flag<&MountConfig::hub>},
      {"--repo-type", "TYPE", "model|dataset|space (alternative to the prefix)",
       [](MountArgs& a, const Value& v) -> std::string {
         if (!v || (*v != "model" && *v != "dataset" && *v != "space")) return "use model, dataset or space";
         a.config.repo_type = *v;
         return "";
       }},
      {"--revision", "REV", "Branch, tag, commit sha or refs/pr/N (default main); pinned to its commit at mount",
       text<&MountConfig::revision>},
      {"--subfolder", "DIR",
       "Show only this directory of the repo (as REPO/SUB/DIR); the mount fails if it is "
       "not a directory at the pinned commit",
       text<&MountConfig::subfolder>},
      {"--endpoint", "URL", "Hub URL (default $HF_ENDPOINT, else https://huggingface.co)",
       text<&MountConfig::endpoint>},
      {"--cache-dir", "DIR",
       "Block cache directory (default $HUBFS_CACHE_DIR, else $XDG_CACHE_HOME/hubfs, else "
       "~/.cache/hubfs); kept across mounts, shareable between mounts",
       text<&MountConfig::cache_dir>},
      {"--cache-size", "SIZE",
       "Byte budget of the block cache, suffixes K M G T (default 10G); least recently "
       "used blocks are evicted first; the Xet chunk index beside it takes a few percent more (at most a "
       "quarter); 0 means no disk cache",
       [](MountArgs& a, const Value& v) -> std::string {
         if (!v) return "needs a value";
         a.cache_size = *v;
         return "";
       }},
      {"--read-ahead", "SIZE",
       "Cap on what read-ahead fetches past a reader's last read, suffixes K M G (default: no cap, the "
       "window follows the reader's pace); a file read at random is fetched whole only if no larger; 0: none "
       "from hubfs, each read fetches the 1 MiB blocks it touches (the kernel still reads up to 2 MiB "
       "ahead of a stream). For metered links: a smaller cap fetches fewer bytes nobody reads, and a "
       "stream waits more round trips",
       [](MountArgs& a, const Value& v) -> std::string {
         if (!v) return "needs a value";
         auto size = parse_size(*v);
         if (!size.ok()) return size.status().message();
         a.config.read_ahead_bytes = *size;
         return "";
       }},
      {"--max-requests", "N",
       "HTTP requests in flight at once (default 16; a Xet read spanning two xorbs sends its second range "
       "beside them: up to N/4 more)",
       [](MountArgs& a, const Value& v) { return number<1, 256>(a.config.max_requests, v, "a number"); }},
      {"--read-timeout", "SECONDS", "Seconds after which a read the Hub cannot serve fails with EIO (default 120)",
       [](MountArgs& a, const Value& v) { return number<1, 3600>(a.config.read_timeout_s, v, "seconds"); }},
      {"--rate-limit-wait", "SECONDS",
       "Seconds a request may wait in all for the Hub's quota windows when it answers 429 "
       "(default 330, longer than the Hub's 5-minute window; --read-timeout does not cut "
       "these waits short); past it the read fails naming the quota",
       [](MountArgs& a, const Value& v) { return number<0, 86400>(a.config.rate_limit_wait_s, v, "seconds"); }},
      {"--ca-bundle", "FILE",
       "PEM file of CA certificates to trust for https (default $REQUESTS_CA_BUNDLE, "
       "else $CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the system's); for a "
       "TLS-intercepting proxy, its CA certificate",
       text<&MountConfig::ca_bundle>},
      {"--shared-cache", "SERVERS",
       "memcached servers of a shared block tier, HOST[:PORT][,HOST[:PORT]...] (or "
       "memcached://...; '+' also separates, and must in -o shared_cache=): on a local miss blocks come from "
       "there before the Hub, and blocks fetched from the Hub are stored there for other machines",
       [](MountArgs& a, const Value& v) -> std::string {
         if (!v) return "needs a value";
         auto servers = parse_shared_cache_servers(*v);
         if (!servers.ok()) {
           // Its message names the option as the command line spells it; the caller names it too.
           std::string m = servers.status().message();
           const std::string named = "--shared-cache " + *v + ": ";
           if (m.rfind(named, 0) == 0) m.erase(0, named.size());
           return m;
         }
         a.config.shared_cache = *servers;
         return "";
       }},
      {"--shared-cache-key-file", "FILE",
       "Key file the machines sharing --shared-cache hold (required with it): authenticates "
       "every block in the tier; make one with `head -c 32 /dev/urandom > F; chmod 600 F`",
       text<&MountConfig::shared_cache_key_file>},
      {"--shared-cache-private", "",
       "Also share blocks of private and gated repos (anyone who can reach the servers can "
       "read what they hold; off by default)",
       flag<&MountConfig::shared_cache_private>},
      {"-f,--foreground", "", "Stay in the foreground, logging to stderr", flag<&MountConfig::foreground>},
      {"--log-file", "FILE", "In the background, append logs to this file", text<&MountConfig::log_file>},
      {"--log-format", "FORMAT",
       "text (default) or json: one JSON object per line with the fields time, level, program, "
       "pid and message",
       [](MountArgs& a, const Value& v) -> std::string {
         if (!v || (*v != "text" && *v != "json")) return "use text or json";
         a.config.log_json = *v == "json";
         return "";
       }},
      {"--metrics", "ADDRESS",
       "Serve the mount's counters as Prometheus text at http://ADDR:PORT/metrics: PORT (on "
       "127.0.0.1), ADDR:PORT or [ADDR]:PORT; port 0 picks a free one (hubfs status --json shows it)",
       text<&MountConfig::metrics>},
      // A flag with an optional value (CLI11's "{default}"): --follow, or --follow=SECONDS; a
      // separate word after it is the next argument, never its value.
      {"--follow{60}", "",
       "Follow the branch: ask the Hub where the revision points every SECONDS (--follow=SECONDS; "
       "default 60, at least 5) and show each new commit to new lookups and opens; files already "
       "open keep reading the commit they were opened at. Without it the mount stays at the commit "
       "it pinned",
       [](MountArgs& a, const Value& v) -> std::string {
         const int least = follow_min_interval_s();
         if (!v) {
           a.config.follow_s = kFollowDefaultIntervalS;
           return "";
         }
         if (!parse_int_in(*v, least, 86400, a.config.follow_s))
           return "give seconds from " + std::to_string(least) + " to 86400 (each check is one request "
                  "against the Hub's API quota, so the least is " + std::to_string(kFollowMinIntervalS) + " s)";
         return "";
       }},
      {"--debug", "", "Log every FUSE request libfuse sees (useful with -f)", flag<&MountConfig::debug>},
      {"--offline", "",
       "Mount from the cache alone, asking the Hub nothing (also when HF_HUB_OFFLINE is set): the "
       "revision resolves to the commit it pointed at when last mounted online, directories listed "
       "then are shown, cached blocks are served and reads of uncached ones fail with EIO at once",
       flag<&MountConfig::offline>},
  };
  return kOptions;
}

bool MountOption::has_default() const { return std::string(names).find('{') != std::string::npos; }

std::string MountOption::long_name() const {
  const std::string all = names;
  const std::string name = all.substr(all.rfind("--"));
  return name.substr(0, name.find('{'));
}

namespace {

// "--cache-dir" -> "cache_dir"; "-f,--foreground" -> "foreground"; "--follow{60}" -> "follow".
std::string o_key(const MountOption& o) {
  std::string key = o.long_name().substr(2);
  for (char& c : key)
    if (c == '-') c = '_';
  return key;
}

// Options mount(8) and systemd act on themselves; when they reach us (mount.fuse3 already drops
// _netdev, nofail, user, users, auto, noauto) they mean nothing to FUSE, which would refuse them.
bool consumed_by_mount(const std::string& opt) {
  static const char* const kNames[] = {"_netdev", "noauto", "auto",  "nofail", "user",
                                       "users",   "nouser", "owner", "group",  "defaults"};
  for (const char* n : kNames)
    if (opt == n) return true;
  // x-systemd.automount, x-systemd.requires=..., x-gvfs-show, and other x-* comments.
  return opt.rfind("x-", 0) == 0 || opt.rfind("comment=", 0) == 0;
}

}  // namespace

std::string apply_o_options(const std::vector<std::string>& groups, MountArgs& args) {
  for (const std::string& group : groups) {
    size_t start = 0;
    while (start <= group.size()) {
      size_t comma = group.find(',', start);
      if (comma == std::string::npos) comma = group.size();
      const std::string opt = group.substr(start, comma - start);
      start = comma + 1;
      const size_t eq = opt.find('=');
      std::string key = opt.substr(0, eq);
      for (char& c : key)
        if (c == '-') c = '_';
      const MountOption* found = nullptr;
      for (const MountOption& o : mount_options())
        if (o_key(o) == key) found = &o;
      if (found) {
        const Value value = eq == std::string::npos ? std::nullopt : Value(opt.substr(eq + 1));
        const std::string err = found->set(args, value);
        if (err == "needs a value") return "-o " + key + " needs a value (" + key + "=...)";
        if (!err.empty()) return "-o " + opt + ": " + err;
      } else if (!consumed_by_mount(opt) && opt != "rw" && !opt.empty()) {
        args.config.fuse_options.push_back(opt);  // allow_other, nonempty, noexec, ...
      }
    }
  }
  return "";
}

std::string o_keys_text() {
  std::string values, flags;
  for (const MountOption& o : mount_options()) {
    const std::string key = o_key(o);
    if (*o.value) {
      values += (values.empty() ? "" : ", ") + key + (key == "shared_cache" ? " with '+' between servers" : "");
    } else if (o.has_default()) {
      values += (values.empty() ? "" : ", ") + key + "[=SECONDS]";
    } else {
      flags += (flags.empty() ? "" : ", ") + key;
    }
  }
  return values + "; " + flags + " take no value";
}

}  // namespace hubfs
