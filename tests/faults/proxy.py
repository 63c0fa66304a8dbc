"""A TCP proxy in front of the database, to break the network between a worker and it.

:class:`Proxy` listens on a free port of 127.0.0.1 and forwards every connection to the
database's host and port. A test breaks the path the ways production does:

* :meth:`Proxy.refuse` -- the listening socket closes: new connections are refused
  (a server down, a primary being promoted); open ones are left alone;
* :meth:`Proxy.reset` -- new connections are accepted and reset at once;
* :meth:`Proxy.drop` -- every open connection is closed (a restart, a killed backend);
* :meth:`Proxy.black_hole` -- nothing is forwarded any more, either way, and nothing is
  closed: open connections wait for answers that never come, new ones are accepted and
  never answered (a NAT that forgot the flow, a failover that moved an address);
* :meth:`Proxy.resume` -- new connections are forwarded again. Those open during a black
  hole stay half-open -- nothing on them is ever forwarded again, nothing closes them --
  as a flow a NAT forgot stays dead; those opened during it are reset.

Threads only (two per connection), no dependency beyond the standard library.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

PASS, REFUSE, RESET, BLACK_HOLE = "pass", "refuse", "reset", "black-hole"


def _closed_hard(sock: socket.socket) -> None:
    """Close ``sock`` with a reset rather than a FIN (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Pair:
    """One client connection and its upstream connection; two pumps, one each way."""

    def __init__(self, proxy: Proxy, client: socket.socket, upstream: socket.socket):
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.closed = False
        self.half_open = False  # black-holed: forwards nothing, ever again

    def start(self) -> None:
        for src, dst in ((self.client, self.upstream), (self.upstream, self.client)):
            threading.Thread(target=self._pump, args=(src, dst), name="proxy-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data or not self.proxy._wait_to_forward(self):
                    break
                dst.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self.proxy._forget(self)


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``target`` until told otherwise (see the module)."""

    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, int(target_port))
        self.mode = PASS
        self.accepted = 0
        self._cond = threading.Condition()
        self._pairs: set[_Pair] = set()
        self._held: list[socket.socket] = []  # accepted while black-holed: never answered
        self._listener: socket.socket | None = None
        self.port = self._listen(0)

    # -- what a test does -----------------------------------------------------------------

    def refuse(self) -> None:
        with self._cond:
            self.mode = REFUSE
            self._close_listener()

    def reset(self) -> None:
        self._set(RESET)

    def black_hole(self) -> None:
        with self._cond:
            for pair in self._pairs:
                pair.half_open = True
        self._set(BLACK_HOLE)

    def drop(self) -> None:
        """Close every open connection (the mode is kept)."""
        with self._cond:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.close()

    def resume(self) -> None:
        with self._cond:
            held, self._held = self._held, []
            self.mode = PASS
            self._cond.notify_all()
            if self._listener is None:
                self._listen(self.port)
        for sock in held:
            _closed_hard(sock)

    def open_connections(self) -> int:
        with self._cond:
            return len(self._pairs)

    def close(self) -> None:
        with self._cond:
            self.mode = REFUSE
            self._close_listener()
            self._cond.notify_all()
            held, self._held = self._held, []
        self.drop()
        for sock in held:
            _closed_hard(sock)

    @contextlib.contextmanager
    def outage(self, how: str = REFUSE) -> Iterator[None]:
        """Break the path (``refuse``, ``reset`` or ``black-hole``) until the block ends."""
        {REFUSE: self.refuse, RESET: self.reset, BLACK_HOLE: self.black_hole}[how]()
        try:
            yield
        finally:
            self.resume()

    # -- inside -----------------------------------------------------------------------------

    def _set(self, mode: str) -> None:
        with self._cond:
            self.mode = mode
            if self._listener is None:
                self._listen(self.port)
            self._cond.notify_all()

    def _listen(self, port: int) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), name="proxy-accept", daemon=True).start()
        return sock.getsockname()[1]

    def _close_listener(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: refusing
            self.accepted += 1
            with self._cond:
                mode = self.mode
                if mode == BLACK_HOLE:
                    self._held.append(client)
                    continue
            if mode != PASS:
                _closed_hard(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _closed_hard(client)
                continue
            pair = _Pair(self, client, upstream)
            with self._cond:
                self._pairs.add(pair)
            pair.start()

    def _wait_to_forward(self, pair: _Pair) -> bool:
        """Hold a pump while black-holed; False once its pair is closed."""
        with self._cond:
            while (pair.half_open or self.mode == BLACK_HOLE) and not pair.closed:
                pair.half_open = True
                self._cond.wait(0.2)
            return not pair.closed

    def _forget(self, pair: _Pair) -> None:
        with self._cond:
            self._pairs.discard(pair)
