"""promkit.py: what the metrics suite's scripts share: one HTTP request to the admin listener and the Prometheus
text format's sample lines as a dict. Imported by metrics/run.py, counts.py and reqtime.py."""
import http.client
import re


def http_req(admin, method, path):
    """(status, {header lower-cased: value}, body bytes) of one request to the admin listener `admin` (host:port)."""
    host, port = admin.rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


def parse(text):
    """{(name, frozenset(labels)): value} of the text format's sample lines."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            raise ValueError(f'not a sample line: {line!r}')
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out
