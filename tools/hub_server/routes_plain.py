"""The plain HTTP view on the API origin, /_plain/{type}/{org}/{name}/{rev}/[path]: HTML
directory indexes and file bytes with Range, for peers that only speak plain HTTP."""

import datetime
import email.utils
import html
import os
import urllib.parse

from .common import PLAIN_PREFIX, HubError
from .store import walk_entries


class PlainRoutes:
    """Handler mixin for the plain view (uses ApiRoutes.open_repo / open_revision)."""

    def handle_plain(self, segs):
        """/_plain/{type}/{org}/{name}/{rev}/[path]: a repo at a revision as a static web
        server would show it, for clients that know nothing of the Hub API."""
        if self.method not in ("GET", "HEAD"):
            raise HubError(405, None, "the plain view is GET/HEAD only")
        if len(segs) < 4:
            raise HubError(404, None, "the plain view is %s{type}/{org}/{name}/{rev}/[path]" % PLAIN_PREFIX)
        state = self.server.state
        repo = self.open_repo(segs[0], segs[1], segs[2])
        commit = self.open_revision(repo, segs[3])
        rest = segs[4:]
        wants_dir = self.raw_path.endswith("/")
        rel = "/".join(s for s in rest if s != "")
        found = state.store.stat_path(commit, rel)
        if found is None:
            raise HubError(404, "EntryNotFound", "%s does not exist at revision %s" % (rel or "/", commit.sha))
        path, is_dir, st = found
        last_modified = email.utils.format_datetime(parse_iso_time(commit.date), usegmt=True)
        if is_dir and not wants_dir:
            # The index's links are relative, so a directory must be fetched with its slash.
            return self.send_bytes(301, b"", {"Location": self.raw_path + "/"}, "text/plain")
        if not is_dir:
            if wants_dir:
                raise HubError(404, "EntryNotFound", "%s is a file, not a directory" % rel)
            self.check_gated_file(repo, segs[0], rel)
            with open(path, "rb") as f:
                return self.send_file(f, os.fstat(f.fileno()).st_size,
                                      {"Last-Modified": last_modified, "X-Repo-Commit": commit.sha})
        title = html.escape("%s@%s/%s" % (repo.id, segs[3], rel))
        lines = ["<!DOCTYPE html>", "<html><head><title>%s</title></head><body>" % title,
                 "<h1>%s</h1>" % title, "<ul>"]
        for name, child_is_dir, child in walk_entries(path, "", recursive=False):
            href = urllib.parse.quote(name) + ("/" if child_is_dir else "")
            label = html.escape(name) + ("/" if child_is_dir else "")
            size = "" if child_is_dir else " %d" % child.st_size
            lines.append('<li><a href="%s">%s</a>%s</li>' % (html.escape(href, quote=True), label, size))
        lines += ["</ul>", "</body></html>", ""]
        self.send_bytes(200, "\n".join(lines).encode(), {"Last-Modified": last_modified,
                                                         "X-Repo-Commit": commit.sha},
                        "text/html; charset=utf-8")


def parse_iso_time(text):
    """A datetime (UTC) from the Hub's ISO dates ("2024-01-01T00:00:00Z", with or without
    milliseconds)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(datetime.timezone.utc)
