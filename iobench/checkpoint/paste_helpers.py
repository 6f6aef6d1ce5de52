"""The helpers the code `checkpoint --tune` hands over carries beside its save and restore, as text: fsyncs, the
copy into a state, the dotted names of a flat file, the steps' folders, their `latest` pointer and what is kept."""

HELPERS = '''
def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: str) -> None:
    """Every file and folder of a checkpoint flushed to the disk, files first."""
    for dirpath, _dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            _fsync(os.path.join(dirpath, name))
        _fsync(dirpath)


def _copy_into(state: dict, loaded: dict) -> None:
    """What load_state_dict does: every tensor copied into the state's own."""
    for key, value in loaded.items():
        if isinstance(value, dict):
            _copy_into(state[key], value)
        elif isinstance(value, torch.Tensor) and isinstance(
            state.get(key), torch.Tensor
        ):
            state[key].copy_(value)
        else:
            state[key] = value
'''

FLAT = '''

def _flat(state: dict, prefix: str = "") -> dict:
    """Every tensor of the state by its dotted path (the same tensors, not copies)."""
    out = {}
    for key, value in state.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        elif isinstance(value, torch.Tensor):
            out[f"{prefix}{key}"] = value
    return out


def _td_key(path: str) -> str:
    return path.replace("%", "%25").replace(".", "%2E")
'''

STEPS = '''

STEP = re.compile(r"step-[0-9]{1,12}")
MARK = ".saved-by-save_checkpoint"  # in every step folder this code made: the only ones remove_old removes


def _folder(root: str, step: int) -> str:
    return os.path.join(root, f"step-{step}")


def _publish(root: str, folder: str) -> None:
    """`latest` now names the new step, durably: a file written beside it, flushed, renamed over the old one."""
    temp = os.path.join(root, f".latest-{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, os.path.basename(folder).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, os.path.join(root, "latest"))
    _fsync(root)


def _latest(root: str) -> str:
    """The folder `latest` names (read as data: a step of this checkpoint, nothing else)."""
    fd = os.open(os.path.join(root, "latest"), os.O_RDONLY | os.O_NOFOLLOW)
    try:
        name = os.read(fd, 65).decode("ascii", "replace")
    finally:
        os.close(fd)
    if not STEP.fullmatch(name):
        raise ValueError(f"latest names {name[:64]!r}, not a step of this checkpoint")
    return os.path.join(root, name)


def _saved_here(path: str) -> bool:
    """A step folder this code saved: a real folder (never a link) holding the mark it wrote."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and stat.S_ISREG(
            os.lstat(os.path.join(path, MARK)).st_mode
        )
    except FileNotFoundError:
        return False


def _new_step(root: str, folder: str) -> None:
    """The step's folder, made new and marked as this code's. A link there is refused (it would lead the save
    elsewhere); a folder this code saved and never published (a save cut short) is replaced; the step `latest` names,
    or anything else of that name, is refused."""
    if os.path.islink(folder):
        raise FileExistsError(
            f"{folder} is a link: a checkpoint is never written through one"
        )
    if os.path.lexists(folder):
        published = (
            os.path.lexists(os.path.join(root, "latest")) and _latest(root) == folder
        )
        if published or not _saved_here(folder):
            raise FileExistsError(
                f"{folder} exists and is not an unpublished save of this code: save another step"
            )
        shutil.rmtree(folder)
    os.mkdir(folder)
    fd = os.open(
        os.path.join(folder, MARK),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
        0o644,
    )
    os.close(fd)


def remove_old(root: str) -> None:
    """The steps older than the newest KEEP removed: call after each save (a job's cleanup, not its save). Only folders
    this code saved (its mark, never a link or another's file named like a step), never the step `latest` names or a
    newer one (an earlier run's steps of higher numbers are kept)."""
    current = int(os.path.basename(_latest(root))[5:])
    steps = sorted(
        n
        for e in os.listdir(root)
        if STEP.fullmatch(e)
        and (n := int(e[5:])) <= current
        and _saved_here(os.path.join(root, e))
    )
    for n in steps[:-KEEP]:
        shutil.rmtree(_folder(root, n))
'''

INPLACE_FOLDER = """

def _folder(root: str, step: int) -> str:
    return os.path.join(root, "current")  # every save over the last


def _new_step(root: str, folder: str) -> None:
    if os.path.islink(folder):
        raise FileExistsError(
            f"{folder} is a link: a checkpoint is never written through one"
        )
    os.makedirs(folder, exist_ok=True)


def _latest(root: str) -> str:
    return os.path.join(root, "current")
"""


TENSORS = [
    "",
    "",
    "def _tensors(state: dict) -> list:",
    "    out = []",
    "    for value in state.values():",
    "        if isinstance(value, dict):",
    "            out.extend(_tensors(value))",
    "        elif isinstance(value, torch.Tensor):",
    "            out.append(value)",
    "    return out",
]
