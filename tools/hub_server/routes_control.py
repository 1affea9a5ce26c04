"""Test control on the API origin, /_hubfs/: stats, trace, reset, expire, health, the fault
queue, and the xorb Ranges refused under --strict-xet-ranges (and the switch saying a test sends
them on purpose).
Control requests are neither counted nor delayed."""

import json

from .common import HubError


class ControlRoutes:
    """Handler mixin for /_hubfs/."""

    def handle_control(self):
        state = self.server.state
        route = (self.method, self.raw_path.rstrip("/"))
        if route == ("GET", "/_hubfs/stats"):
            return self.send_json(200, state.stats.snapshot())
        if route == ("GET", "/_hubfs/trace"):
            return self.send_json(200, state.stats.trace())
        if route == ("GET", "/_hubfs/quotas"):
            return self.send_json(200, state.quotas.snapshot())
        if route == ("GET", "/_hubfs/refused-ranges"):
            return self.send_json(200, dict(state.refused_ranges.snapshot(), strict=state.strict_xet_ranges))
        if route == ("POST", "/_hubfs/refused-ranges/expect"):
            state.refused_ranges.expect()
            return self.send_json(200, {"ok": True})
        if route == ("GET", "/_hubfs/health"):
            return self.send_json(200, {"ok": True})
        if route == ("POST", "/_hubfs/reset"):
            state.stats.reset()
            return self.send_json(200, {"ok": True})
        if route == ("POST", "/_hubfs/expire"):
            state.signer.expire_all()
            state.xet_auth.expire_all()
            return self.send_json(200, {"ok": True})
        if route == ("GET", "/_hubfs/faults"):
            return self.send_json(200, state.faults.pending())
        if route == ("DELETE", "/_hubfs/faults"):
            state.faults.clear()
            return self.send_json(200, {"ok": True})
        if route == ("POST", "/_hubfs/faults"):
            try:
                spec = json.loads(self.body or b"null")
                state.faults.add(spec if isinstance(spec, list) else [spec])
            except ValueError as e:
                raise HubError(400, None, "bad fault: %s" % e)
            return self.send_json(200, {"ok": True, "pending": state.faults.pending()})
        raise HubError(404, None, "no control endpoint %s %s" % route)
