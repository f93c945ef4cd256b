"""The serving process's end of the PCM channel (engine_patches/pcm_wire.py).

One PULL socket, bound before any request is sent, read by one task on the event loop: each message
is one engine step's new PCM for the utterances of this process, sliced (no copy) into the queue of each
utterance. A queue gets int16 arrays, then `None` after the utterance's final entry; an unknown key (an
utterance its consumer already dropped) is ignored.
"""

import asyncio
import logging
import os
import uuid

from engine_patches.pcm_wire import decode, sink_address

from ..runtime_dirs import ipc_base
from .pcm_queue import PcmQueue

log = logging.getLogger(__name__)


def new_sink_base() -> str:
    """A fresh base address for one server's PCM channel: IPC sockets named after this process in the
    server's IPC directory (each sink's socket file is removed when its receiver closes)."""
    return f"ipc://{os.path.join(ipc_base(), f'uttera-pcm-{os.getpid()}-{uuid.uuid4().hex[:8]}')}"


class PcmReceiver:
    def __init__(self, sink_base: str, sink: int):
        import zmq
        import zmq.asyncio

        self.sink = sink
        self.address = sink_address(sink_base, sink)
        self._context = zmq.asyncio.Context()
        self._socket = self._context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.bind(self.address)
        self._queues: dict[str, PcmQueue] = {}
        self._task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.messages = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="uttera-pcm-receiver")

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    def open(self, key: str) -> PcmQueue:
        """The queue of utterance `key`'s PCM (read-only int16 arrays, then None); open it before its
        request starts. A request aborted before the engine ever scheduled it sends nothing, not even
        its final None: after an abort, `drop` the key instead of waiting."""
        if self.error is not None:
            raise RuntimeError("the PCM channel failed") from self.error
        queue: PcmQueue = asyncio.Queue()
        self._queues[key] = queue
        return queue

    def drop(self, key: str) -> None:
        """Forget `key`: whatever still arrives for it is ignored."""
        self._queues.pop(key, None)

    async def _run(self) -> None:
        try:
            while True:
                frames = await self._socket.recv_multipart(copy=True)
                self.messages += 1
                for key, pcm, final in decode(frames):
                    queue = self._queues.get(key)
                    if queue is None:
                        continue
                    if pcm.shape[0]:
                        queue.put_nowait(pcm)
                    if final:
                        del self._queues[key]
                        queue.put_nowait(None)
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            log.exception("PCM channel failed")
            self.error = e
            for queue in self._queues.values():
                queue.put_nowait(e)
            self._queues.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._socket.close(linger=0)
        self._context.term()
        path = self.address.removeprefix("ipc://")
        if path != self.address and os.path.exists(path):
            os.unlink(path)
