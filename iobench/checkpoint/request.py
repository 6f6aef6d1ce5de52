"""What `iobench checkpoint` is asked, checked once before anything is made: the sizes against memory (per rank, under
a memory cgroup), the device and its room, the folder, the results file, which libraries run here (each that does not
is said in one line: not installed, no way to the target, needs CUDA), the torch threads every trial gets."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

from iobench.checkpoint import defaults as default
from iobench.checkpoint.defaults import MAX_KILLS, MAX_ROUNDS
from iobench.checkpoint.libraries import LIBRARIES, OBJECT, Library
from iobench.checkpoint.save_modes import SAFE
from iobench.checkpoint.state import StateSpec
from iobench.choices import DeviceChoice
from iobench.errors import IobenchError
from iobench.plan.place import RunPlace
from iobench.results.checkpoint_record import CACHES, SaveMode
from iobench.storage.remote.profiles import Profile
from iobench.system.ranks import MAX_RANKS, RANK_FIXED_BYTES
from iobench.units import count_of


@dataclass(frozen=True)
class CheckpointRequest:
    specs: tuple[StateSpec, ...]  # the state sizes, in order
    libraries: tuple[str, ...]  # asked for (those not installed or not able here are skipped, each said)
    directory: Path = default.DIRECTORY
    caches: tuple[str, ...] = CACHES
    rounds: int = default.ROUNDS
    results: Path = default.RESULTS
    device: DeviceChoice = DeviceChoice("cpu")
    nproc: int = 1
    torch_threads: int | None = None  # None: what a job here has (torch's default in one process), recorded
    save_modes: tuple[SaveMode, ...] = default.SAVE_MODES
    kill_test: int = default.KILL_TEST
    step: str = "none"  # the training step run beside each save (`--step`), and a restart's first step
    restart: bool = False  # each round also a restart: a fresh process to its first training step (`--restart`)
    kill_spec: StateSpec | None = None
    remote: Profile | None = None  # object storage: iobench's writable store on loopback, shaped so
    endpoint_url: str | None = None  # object storage: this store's bucket
    tune: bool = False  # `--tune`: the libraries with code to paste, searched within `budget_minutes`; the code printed
    budget_minutes: float = default.TUNE_BUDGET_MINUTES

    def __post_init__(self) -> None:
        object.__setattr__(self, "save_modes", tuple(SaveMode(m) for m in self.save_modes))  # each parsed once
        object.__setattr__(self, "device", DeviceChoice(self.device))


def checked(request: CheckpointRequest) -> tuple[CheckpointRequest, list[Library], list[str]]:
    """The request with its device and torch threads settled, the libraries that run here, and a line for each asked
    for that does not (not installed, no way to the target, needs CUDA); a refusal in one line before anything is
    made."""
    from iobench.measuring.user_code import is_reference, load_callable
    from iobench.results.checkpoint_record import KINDS
    from iobench.results.store import check_writable
    from iobench.storage.checkpoints import check_directory

    check_writable(request.results, kinds=KINDS)
    check_directory(request.directory)
    if is_reference(request.step):  # the user's step imports here, before the plan is said (its trials import it too)
        load_callable(request.step, "--step")
    if request.nproc > 1 and request.device.kind == "cuda":
        raise IobenchError("checkpoint --nproc runs its ranks on the host (gloo); leave out --device")
    if request.remote is not None and request.endpoint_url is not None:
        raise IobenchError("checkpoint: --remote (iobench's store) or --endpoint-url (yours), not both")
    largest = max(request.specs, key=lambda s: s.state_bytes)
    device = device_with_room(request.device, largest.state_bytes, request.nproc)
    libraries, skipped = usable(request, device)
    if not libraries:
        raise IobenchError("checkpoint: none of --libraries runs here: " + "; ".join(skipped))
    for spec in request.specs:
        check_fits(spec, libraries, request.nproc)  # a refusal is its one line, before anything else is said
    if request.kill_test and request.kill_spec is not None:
        check_fits(request.kill_spec, [lib for lib in libraries if lib.killed], what="--kill-params")
    if request.remote is None and request.endpoint_url is None:
        check_disk(request)
    threads = request.torch_threads or default_threads()
    caches = request.caches
    if (request.remote is not None or request.endpoint_url is not None) and "warm" in caches:
        caches = ("cold",)  # an object store's answers come over the network: nothing is cached here
        skipped.append(
            "object storage: a restore reads from the store (nothing of it is cached here): one a round, "
            "recorded as cold"
        )
    return replace(request, device=device, torch_threads=threads, caches=caches), libraries, skipped


def for_tune(request: CheckpointRequest) -> tuple[CheckpointRequest, list[str]]:
    """`--tune`'s request: the libraries it can hand over as code, each killed (TUNE_KILLS times unless --kill-test
    says more: it never recommends what a kill lost), in a local folder by one process; a line for each left out."""
    from iobench.checkpoint.paste import PASTED

    if request.remote is not None or request.endpoint_url is not None:
        raise IobenchError(
            "checkpoint --tune hands over code for a local folder (--dir): leave out --remote and --endpoint-url"
        )
    if request.nproc > 1:
        raise IobenchError("checkpoint --tune saves in one process: leave out --nproc")
    kept = tuple(n for n in request.libraries if n in PASTED)
    said = [
        f"left out of --tune: {name} (no code to hand over; `checkpoint --libraries {name}` measures it)"
        for name in request.libraries
        if name not in PASTED and not LIBRARIES[name].ceiling
    ]
    if not kept:
        raise IobenchError(f"checkpoint --tune: --libraries names none of {', '.join(PASTED)}")
    return replace(request, libraries=kept, kill_test=request.kill_test or default.TUNE_KILLS), said


def usable(request: CheckpointRequest, device: str) -> tuple[list[Library], list[str]]:
    libraries, skipped = [], []
    remote = request.remote is not None or request.endpoint_url is not None
    for lib in (LIBRARIES[n] for n in request.libraries):
        if not lib.installed:
            skipped.append(f"skipped {lib.name}: {lib.needs} is not installed (pip install 'iobench[{lib.extra}]')")
        elif lib.needs_cuda and not device.startswith("cuda"):
            skipped.append(f"skipped {lib.name}: {lib.needs_cuda} (--device cuda)")
        elif remote and OBJECT not in lib.targets:
            skipped.append(f"skipped {lib.name}: it writes to a local folder only")
        else:
            libraries.append(lib)
    return libraries, skipped


def default_threads() -> int:
    """torch's intra-op threads in a process here: what a training job has unless it sets them."""
    import torch

    return torch.get_num_threads()


def device_with_room(text: str, state_bytes: int, nproc: int = 1) -> str:
    """cpu, or a CUDA device that exists here and has room for the state (auto: CUDA where there is one and the
    trials run in one process); one line otherwise (`system.devices.device_here`, as every command's)."""
    import torch

    from iobench.system.devices import device_here

    device = device_here(text, cuda_ok=nproc == 1)
    if device.type == "cpu":
        return "cpu"
    free, _ = torch.cuda.mem_get_info(device)
    if state_bytes * 1.1 > free:
        raise IobenchError(
            f"checkpoint --device {text}: a {state_bytes / 1e9:.2f} GB state and "
            f"{free / 2**30:.1f} GiB free on the device; give a smaller --params"
        )
    return str(device)


def check_fits(
    spec: StateSpec, libraries: list[Library], nproc: int = 1, free: int | None = None, what: str = "--params"
) -> None:
    """Refuse in one line a state that a library's save or restore would not fit in memory: a save holds the state,
    a non-mapped load about twice it (torch.load, safetensors' load_file), each rank of a library that takes ranks
    its own copy and a rank's own memory (`RANK_FIXED_BYTES`). The memory is what this process can take: MemAvailable,
    or less under a memory cgroup."""
    from iobench.system.memory import MemoryRoom, memory_room

    room = memory_room() if free is None else MemoryRoom(free, free, "")
    if not libraries:
        return

    def need(lib: Library) -> int:
        ranks = nproc if lib.ranks else 1
        fixed = RANK_FIXED_BYTES * ranks if ranks > 1 else 0
        return int(spec.state_bytes * lib.memory_factor * 1.1) * ranks + fixed

    worst = max(libraries, key=need)
    if need(worst) > room.available:
        ranks = (
            f" in each of {nproc} ranks ({RANK_FIXED_BYTES / 1e6:,.0f} MB a rank besides)"
            if worst.ranks and nproc > 1
            else ""
        )
        smaller = f"give a smaller {what}" if not spec.source else "give a smaller model"
        if worst.ranks and nproc > 1:
            smaller += ", fewer --nproc"
        raise IobenchError(
            f"checkpoint: a {spec.state_bytes / 1e9:.2f} GB state{ranks} needs about "
            f"{need(worst) / 1e9:.1f} GB of memory for {worst.name} and "
            f"{room.available / 1e9:.1f} GB is {room.says()}; {smaller} or leave {worst.name} out "
            "with --libraries"
        )


DISK_MARGIN = 1.1  # a checkpoint's bytes on disk beside the state's: headers, metadata, the file system's blocks


def check_disk(request: CheckpointRequest, free: int | None = None) -> None:
    """Refuse in one line, before the first save, a --dir without room for the largest checkpoint a save holds there
    at once: two steps side by side in safe mode (step N kept until N+1 is durable), K+1 keeping K, one in place; the
    kill test's likewise. One library's checkpoints exist at a time (each is removed after its last trial)."""
    from iobench.system.fsutil import free_bytes

    # what a save holds there at once: the step being written beside the ones kept (safe: N; keep:K: K)
    steps = max(1 if m.inplace else m.saves for m in request.save_modes)
    sizes = [s.state_bytes for s in request.specs]
    if request.kill_test and request.kill_spec is not None:
        sizes.append(request.kill_spec.state_bytes)
    need = int(max(sizes) * steps * DISK_MARGIN)
    free = free_bytes(request.directory) if free is None else free
    if need > free:
        why = (
            "a safe save keeps step N beside step N+1"
            if steps == 2 and SAFE in request.save_modes
            else f"a keep save holds {steps} steps side by side"
            if steps > 1
            else "a save holds the checkpoint"
        )
        hint = ", --save-mode inplace" if steps > 1 else ""
        raise IobenchError(
            f"checkpoint --dir {request.directory}: {why}: about {need / 1e9:,.2f} GB needed there and "
            f"{free / 1e9:,.2f} GB is free; give a smaller --params{hint} or another --dir"
        )


def environment_of(request: CheckpointRequest, libraries: list[Library]) -> dict:
    """Where it was measured, as plain values (the checkpoint folder's file system, the libraries' versions)."""
    import torch

    from iobench.system.environment import environment

    names = [n for lib in libraries for n in (lib.needs,) if n] + (
        ["s3torchconnector"] if request.remote or request.endpoint_url else []
    )
    folder = request.directory if request.directory.exists() else Path(os.getcwd())
    return environment(folder, torch.device(request.device), names)


def checkpoint_request(
    place: RunPlace,
    *,
    params: str,
    layout: str,
    source: Path | None,
    libraries: str,
    cache: str | None,
    rounds: int,
    nproc: int | None,
    torch_threads: int | None,
    save_mode: str,
    kill_test: int,
    kill_params: str,
    step: str,
    restart: bool,
    tune: bool,
    budget_minutes: float,
) -> CheckpointRequest:
    """The request from a command's values as typed, each checked in one line (the sizes, the libraries, the caches,
    the save modes), and the place converted once as every measuring command's is (`iobench.plan.place.place_of`:
    the folder, the device, the object store and its profile)."""
    from iobench.measuring.steps import parse_step
    from iobench.plan.run_options import RUN_OPTIONS

    try:
        if source is not None:
            specs = (StateSpec.of_file(Path(source)),)
        else:
            specs = tuple(StateSpec(n, layout) for n in sizes_of(params, "--params"))
        # the kill test tests a save's commit, not the weights: it runs at --kill-params, generated, as the docs say
        # (with the user's 928 MB file it killed saves of the whole state, 35 s a kill)
        kill = StateSpec(sizes_of(kill_params, "--kill-params")[0], layout)
    except ValueError as exc:
        raise IobenchError(str(exc)) from None
    return CheckpointRequest(
        specs=specs,
        libraries=tuple(library_names(libraries)),
        directory=place.data_dir,
        caches=caches_of(cache),
        rounds=count_of(rounds, "--rounds", 1, MAX_ROUNDS),
        results=place.results,
        device=place.device,
        nproc=count_of(1 if nproc is None else nproc, "--nproc", 1, MAX_RANKS),
        torch_threads=RUN_OPTIONS["torch_threads"].value(torch_threads),
        save_modes=SaveMode.parse_list(save_mode),
        kill_test=count_of(kill_test, "--kill-test", 0, MAX_KILLS),
        kill_spec=kill,
        step=parse_step(step),
        restart=bool(restart),
        remote=place.remote,
        endpoint_url=place.endpoint_url,
        tune=bool(tune),
        budget_minutes=budget_of(budget_minutes),
    )


def budget_of(value: object) -> float:
    """--budget-minutes: a number of minutes above 0, at most a week."""
    try:
        minutes = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        minutes = math.nan
    if not (math.isfinite(minutes) and 0 < minutes <= default.MAX_BUDGET_MINUTES):
        raise IobenchError(f"--budget-minutes: a number of minutes above 0 and at most a week, got {value!r}")
    return minutes


def sizes_of(text: str, option: str) -> list[int]:
    """Parameters, a comma list: counts (2.5e7, 100M: powers of 1000) or the state's bytes (256MiB, 1GiB, 4GB: the
    parameters that make that many bytes at 14 bytes a parameter)."""
    from iobench.checkpoint.state import BYTES_PER_PARAM
    from iobench.units import parse_bytes, parse_size

    found = []
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        if item.upper().endswith("B"):
            decimal = not item.upper().endswith("IB")
            value = parse_size(item[:-1], option, "bytes") if decimal else parse_bytes(item, option)
            found.append(max(1, value // BYTES_PER_PARAM))
        else:
            found.append(parse_size(item, option, "parameters"))
    if not found:
        raise IobenchError(f"{option}: give at least one size (2.5e7 parameters, or 1GiB of state)")
    return found


def library_names(text: str) -> list[str]:
    names = list(LIBRARIES) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise IobenchError(f"--libraries: name at least one of {', '.join(LIBRARIES)}, or all")
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise IobenchError(f"--libraries: unknown {unknown[0]!r}; one of {', '.join(LIBRARIES)} or all")
    return names


def caches_of(text: str | None) -> tuple[str, ...]:
    caches = tuple(c.strip() for c in str("warm,cold" if text is None else text).split(",") if c.strip())
    if not caches or any(c not in CACHES for c in caches):
        raise IobenchError(f"--cache: a checkpoint restores warm, cold or warm,cold, got {text!r}")
    return caches
