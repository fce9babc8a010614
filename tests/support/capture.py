"""A loopback capture, as `tcpdump -i lo -A 'tcp port P'` would take (tcpdump is not always
installed): a raw AF_PACKET socket on `lo` (it needs root or CAP_NET_RAW) records the TCP
payload bytes of every segment to or from the ports asked for, both directions."""

from __future__ import annotations

import socket
import struct
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

_ETH_P_ALL = 0x0003
_ETH_P_IP = 0x0800


class Capture:
    def __init__(self, ports: set[int]) -> None:
        self.ports = ports
        self._bytes: dict[int, bytearray] = defaultdict(bytearray)
        self._lock = threading.Lock()

    def seen(self, port: int) -> bytes:
        """Every payload byte captured to or from `port`, in capture order."""
        with self._lock:
            return bytes(self._bytes[port])

    def _record(self, frame: bytes) -> None:
        if len(frame) < 34 or struct.unpack("!H", frame[12:14])[0] != _ETH_P_IP:
            return
        ip = frame[14:]
        header = (ip[0] & 0x0F) * 4
        if ip[9] != socket.IPPROTO_TCP:
            return
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[header:total]
        source, destination = struct.unpack("!HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        for port in {source, destination} & self.ports:
            with self._lock:
                self._bytes[port] += payload


@contextmanager
def loopback_capture(ports: set[int]) -> Iterator[Capture]:
    capture = Capture(ports)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.settimeout(0.1)  # how often the reader looks whether to stop
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                frame = sock.recv(65535)
            except TimeoutError:
                continue
            capture._record(frame)

    reader = threading.Thread(target=read, name="loopback-capture", daemon=True)
    reader.start()
    try:
        yield capture
    finally:
        stop.set()
        reader.join(timeout=5)
        sock.setblocking(False)
        try:  # what the kernel queued before the stop: the last segments too
            while True:
                capture._record(sock.recv(65535))
        except BlockingIOError:
            pass
        finally:
            sock.close()
