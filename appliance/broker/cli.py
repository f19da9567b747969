"""``appliance broker``: run the broker in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
import sys

from appliance.broker.blog import broker_logger
from appliance.broker.config import BrokerConfig
from appliance.logs import configure

READY_PREFIX = "broker ready bootstrap="


def _install_uvloop() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def _serve(config: BrokerConfig, loop_name: str) -> int:
    from appliance.broker.server import BrokerServer

    log = broker_logger()
    server = BrokerServer(config)
    try:
        host, port = await server.start()
    except OSError as exc:
        log.error("broker.bind_failed", host=config.host, port=config.port, error=str(exc))
        print(f"broker: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bootstrap = f"{host}:{port}"
    print(f"{READY_PREFIX}{bootstrap}", flush=True)
    log.info("broker.ready", bootstrap=bootstrap, data_dir=config.data_dir, loop=loop_name,
             topics=sorted(server.registry.topics), flush=config.flush)
    await stop.wait()
    log.info("broker.stopping", bootstrap=bootstrap)
    await server.stop()
    log.info("broker.stopped", bootstrap=bootstrap)
    return 0


def run_broker(host: str = "127.0.0.1", port: int = 9092, data_dir: str | None = None,
               **options) -> int:
    """Run until a signal; 0 on a clean stop, 1 if the broker cannot start."""
    configure()
    config = BrokerConfig(host=host, port=port, data_dir=data_dir, **options)
    loop_name = _install_uvloop()
    return asyncio.run(_serve(config, loop_name))
