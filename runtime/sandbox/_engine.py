"""One wasmtime engine per process, its epoch ticker, and the loaded-module cache.

Engine flags are fixed here (fuel and epoch interruption on, Cranelift tuned for speed) because
precompiled artifacts are only valid for the flags they were compiled with; the flags string is
part of every artifact's cache key. Instances come from wasmtime's pooling allocator sized for
the process (`_pooling`): a runtime choice, not a code generation one, so artifacts are the
same with it or without.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import wasmtime
from wasmtime.component import Component

from amber.abi import ACTIVITY_EXPORT_PREFIX, HOST_MODULE, is_component
from amber.versions import ArtifactCache, InvalidModule

from ._component import ComponentHost
from ._host import HostImports
from ._http import HttpPolicy, http_policy
from ._pooling import DEFAULT_INSTANCES, pooled_config

EPOCH_TICK_S = 0.010
ENGINE_FLAGS = "consume_fuel=1;epoch_interruption=1;opt=speed"


def _new_engine(instances: int) -> tuple[wasmtime.Engine, bool]:
    """The engine, and whether its instances come from a pool (`_pooling`)."""
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    config.cranelift_opt_level = "speed"
    pooled = pooled_config(config, instances)
    return wasmtime.Engine(config), pooled


class _EpochTicker(threading.Thread):
    """Advances the engine's epoch every 10 ms, so a deadline of N ms is N/10 ticks.

    Wasm releases the GIL while it runs, so a Python thread is enough.
    """

    def __init__(self, engine: wasmtime.Engine) -> None:
        super().__init__(name="amber-epoch-ticker", daemon=True)
        self._engine = engine
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(EPOCH_TICK_S):
            self._engine.increment_epoch()

    def stop(self) -> None:
        self._stop.set()


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedModule:
    """A module version ready to instantiate, with what the host checks commands against."""

    pre: wasmtime.InstancePre | None
    """A core module's instantiation, imports resolved (None for a component)."""
    component: Component | None = None
    """A Python guest (None for a core module)."""
    activities: frozenset[str]
    """Activity names the module exports (a workflow may only schedule these)."""
    http: HttpPolicy | None
    """The module's declared HTTP allowlist (None: no HTTP capability)."""
    continues: bool = False
    """It imports `await_next` (a component: `await-next`): a live instance can go on after a
    wait (`StickySandbox`)."""
    reads_delta: bool = False
    """Its manifest says its `await_next` reads delta answers."""


def _once(fetch: Callable[[], bytes]) -> Callable[[], bytes]:
    got: list[bytes] = []

    def once() -> bytes:
        if not got:
            got.append(fetch())
        return got[0]

    return once


def _activities(module: wasmtime.Module) -> frozenset[str]:
    prefix = ACTIVITY_EXPORT_PREFIX
    return frozenset(e.name[len(prefix) :] for e in module.exports if e.name.startswith(prefix))


class SandboxEngine:
    """Compiled modules ready to instantiate, for one process.

    Keeps an `InstancePre` (imports already resolved) per module digest, least recently used
    evicted beyond `max_modules`. Artifacts come from the on-disk cache.
    """

    def __init__(
        self, artifact_dir: Path, *, max_modules: int = 64, instances: int = DEFAULT_INSTANCES
    ) -> None:
        """`instances`: how many guest instances may be alive at once in this process (the
        pool's size: keepers' instances and running activations; see `_pooling`)."""
        self.engine, self.pooled = _new_engine(instances)
        self.artifact_dir = artifact_dir
        """Where compiled artifacts are cached (other processes may share it)."""
        self.host = HostImports()
        self._linker = wasmtime.Linker(self.engine)
        self.host.define(self._linker)
        self.components = ComponentHost(self.engine, self.host)
        """The linker and WASI stubs of Python guests (components)."""
        self._artifacts = ArtifactCache(artifact_dir, self.engine, ENGINE_FLAGS)
        self._loaded: OrderedDict[str, LoadedModule] = OrderedDict()
        self._max_modules = max_modules
        self._lock = threading.Lock()
        self.activation_lock = threading.Lock()
        """Held while a guest runs: host imports route through one shared `HostImports`."""
        self._ticker = _EpochTicker(self.engine)
        self._ticker.start()

    @property
    def artifacts(self) -> ArtifactCache:
        """The on-disk cache of this engine's compiled artifacts."""
        return self._artifacts

    def load(self, digest: str, fetch: Callable[[], bytes]) -> LoadedModule:
        """The ready-to-instantiate module for `digest`; `fetch()` gives its bytes on a miss."""
        with self._lock:
            loaded = self._loaded.get(digest)
            if loaded is not None:
                self._loaded.move_to_end(digest)
                return loaded
        fetch = _once(fetch)  # deciding what the bytes are may already need them
        if self._artifacts.component_path_for(digest).exists() or (
            not self._artifacts.path_for(digest).exists() and is_component(fetch())
        ):
            loaded = self._load_component(digest, fetch)
        else:
            loaded = self._load_module(digest, fetch)
        with self._lock:
            self._loaded[digest] = loaded
            while len(self._loaded) > self._max_modules:
                self._loaded.popitem(last=False)
        return loaded

    def _load_component(self, digest: str, fetch: Callable[[], bytes]) -> LoadedModule:
        component = self._artifacts.load_component(digest, fetch)
        manifest = self._artifacts.manifest(digest, fetch)
        self.components.prepare(component)
        return LoadedModule(
            pre=None,
            component=component,
            activities=frozenset(manifest.activities),
            http=http_policy(manifest),
            continues=True,  # every component imports the whole host interface: await-next
            reads_delta=manifest.reads_delta(),
        )

    def _load_module(self, digest: str, fetch: Callable[[], bytes]) -> LoadedModule:
        module = self._artifacts.load(digest, fetch)
        manifest = self._artifacts.manifest(digest, fetch)
        try:
            pre = self._linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            # Validated modules import only what the linker defines, except test-only imports
            # accepted where they were enabled and loaded where they are not.
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise InvalidModule(f"module {digest[:12]} does not link: {reason}") from None
        return LoadedModule(
            pre=pre,
            activities=_activities(module),
            http=http_policy(manifest),
            continues=any(
                i.module == HOST_MODULE and i.name == "await_next" for i in module.imports
            ),
            reads_delta=manifest.reads_delta(),
        )

    def close(self) -> None:
        self._ticker.stop()
