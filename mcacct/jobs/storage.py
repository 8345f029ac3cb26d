r"""Where job files live: local paths, and URLs of any filesystem that fsspec knows (``gs://``, ``s3://``,
``az://``, ``memory://`` ...), each file read and written whole.

Shard, merged and calibration-plan files are JSON documents that a job rewrites at every checkpoint, and that a
merge or a resumed shard may read at any moment. A reader must find either the previous or the next complete state
of a file, never a part of one; that is what makes a killed shard resumable without losing or double-counting a
chunk (:func:`mcacct.jobs.shards.run_shard`). How each kind of storage gives it:

* **Local paths** (and ``file://`` URLs): the bytes go to a temporary file ``.NAME.XXXX.tmp`` in the target's
  directory, are flushed and ``fsync``\ ed, and the temporary file is renamed over the target (:func:`os.replace`,
  atomic on POSIX within one filesystem, NFS and Lustre included); the directory is then ``fsync``\ ed so that the
  rename survives a crash. A writer killed before the rename leaves its temporary file; the next write of the same
  target removes those older than :data:`STALE_TMP_SECONDS`.
* **Object stores** (the protocols of :data:`WHOLE_OBJECT_PROTOCOLS`): one ``pipe`` (upload) of the complete bytes
  to the target's name. An object store has no atomic rename (a "move" is a copy and a delete), so a temporary name
  would buy nothing; instead the store itself publishes an object only when its upload completes: a single PUT, or
  the completing request of an S3 multipart or GCS resumable upload, or Azure's block-list commit, makes all the
  new bytes visible at once, and until then readers get the previous object. GCS, S3 and Azure Blob Storage read
  their own writes and list them consistently (strong consistency), so a resumed shard on another machine reads the
  last checkpoint that completed. A writer killed mid-upload leaves the previous object as it was, and no temporary
  object behind. ``memory://`` (fsspec's in-process store, for tests) replaces its entry in one assignment.
* **Other protocols** (``sftp://``, ``hdfs://``, ``ftp://``, ``smb://`` ...) can be read, but writing to them is
  refused: their writes fill the target in place, and whether their rename replaces a file atomically depends on
  the server. Write to a mounted volume (a local path) or to an object store instead.

The transport is never trusted: every reader checks each file's digest (and, under ``MCACCT_SHARD_KEY``, its MAC;
:mod:`mcacct.jobs.integrity`), whichever storage it came from. Job files are written without locks; a directory
holds the shards of one plan, each written by one job at a time (a scheduler that might run one index twice at the
same time, such as a Kubernetes Job after a node is lost, writes the same deterministic chunks twice).

The package fsspec is a dependency of mcacct; the package of an object store's protocol (``gcsfs`` for ``gs://``,
``s3fs`` for ``s3://``, ``adlfs`` for ``az://``) is not, and a URL whose package is missing is refused naming it.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import posixpath
import re
import tempfile
import time
from typing import Any

__all__ = ["WHOLE_OBJECT_PROTOCOLS", "STALE_TMP_SECONDS", "is_url", "check_url", "join", "basename", "absolute",
           "identity", "exists", "isfile", "isdir", "list_names", "read_bytes", "read_json", "write_bytes",
           "write_json"]

#: Protocols whose writes are whole-object uploads that the store publishes atomically (module docstring):
#: Google Cloud Storage, Amazon S3 (and S3-compatible stores through s3fs), Azure Blob Storage / ADLS Gen2, and
#: fsspec's in-process ``memory://``.
WHOLE_OBJECT_PROTOCOLS = frozenset({"gs", "gcs", "s3", "s3a", "az", "abfs", "abfss", "memory"})
#: A temporary file of a local write older than this (seconds) was left by a killed writer.
STALE_TMP_SECONDS = 600.0

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)(://|::)")


# -- names ---------------------------------------------------------------------------------------------------
def is_url(path: str) -> bool:
    """Whether ``path`` is a URL handled by fsspec (``PROTOCOL://...`` or a chained ``A::B://...``).

    ``file://`` URLs count as local paths.

    Parameters
    ----------
    path : str or os.PathLike
        A local path or a URL.

    Returns
    -------
    bool
    """
    m = _URL.match(os.fspath(path))
    return m is not None and not (m.group(1).lower() == "file" and m.group(2) == "://")


def _local(path: str) -> str:
    """The local path of ``path`` (``file://`` stripped)."""
    path = os.fspath(path)
    return path[len("file://"):] if path.lower().startswith("file://") else path


def join(directory: str, name: str) -> str:
    """``directory/name``: :func:`os.path.join` for a local path, ``/``-joined for a URL.

    Parameters
    ----------
    directory : str
        A local directory or a URL.
    name : str
        The entry name.

    Returns
    -------
    str
    """
    if is_url(directory):
        return directory.rstrip("/") + "/" + name
    return os.path.join(directory, name)


def basename(path: str) -> str:
    """The last component of ``path`` (a local path or a URL).

    Parameters
    ----------
    path : str

    Returns
    -------
    str
    """
    return posixpath.basename(path.rstrip("/")) if is_url(path) else os.path.basename(_local(path))


def absolute(path: str) -> str:
    """``path`` made absolute for reports: :func:`os.path.abspath` for a local path; a URL as given.

    Parameters
    ----------
    path : str

    Returns
    -------
    str
    """
    return path if is_url(path) else os.path.abspath(_local(path))


def identity(path: str) -> str:
    """A name equal for two spellings of the same file.

    The real path of a local file; the protocol and the normalised path of a URL.

    Parameters
    ----------
    path : str

    Returns
    -------
    str

    Raises
    ------
    ValueError
        For a URL whose protocol's package is missing or that fsspec does not know.
    """
    if not is_url(path):
        return os.path.realpath(_local(path))
    fs, p = _filesystem(path)
    return fs.unstrip_protocol(posixpath.normpath(p))


# -- filesystems -----------------------------------------------------------------------------------------------
def _filesystem(url: str) -> tuple[Any, str]:
    """fsspec's filesystem of ``url`` and the path within it; ``ValueError`` naming the package a protocol needs
    when it is not installed, or saying that fsspec knows no such protocol."""
    import fsspec
    from fsspec.registry import known_implementations

    protocol = _URL.match(url).group(1).lower()
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as err:
        impl = known_implementations.get(protocol, {})
        package = impl["class"].split(".")[0] if "class" in impl else None
        need = f"the package {package}, which is not installed (pip install {package})" if package else \
            "a package that is not installed"
        raise ValueError(f"{url}: {protocol}:// URLs need {need}; fsspec says: {err}") from None
    except ValueError as err:
        if "protocol" not in str(err).lower():
            raise
        raise ValueError(f"{url}: fsspec knows no protocol {protocol!r} ({err}); give a local path or a URL of a "
                         "filesystem fsspec knows (gs://, s3://, az://, ...)") from None


def _protocols(fs: Any) -> set[str]:
    p = fs.protocol
    return {p} if isinstance(p, str) else set(p)


def check_url(path: str, write: bool = False) -> None:
    """Refuse, before any work, a URL that cannot be used.

    Refused: its protocol's package is missing or fsspec knows no such protocol, or (with ``write``) its filesystem
    does not write whole files atomically (:data:`WHOLE_OBJECT_PROTOCOLS`). Local paths pass.

    Parameters
    ----------
    path : str
    write : bool, default False
        Whether job files will be written there.

    Raises
    ------
    ValueError
        Naming the URL, for the cases above.
    """
    if not is_url(path):
        return
    fs, _ = _filesystem(path)
    if write and not _protocols(fs) & WHOLE_OBJECT_PROTOCOLS:
        raise ValueError(f"{path}: cannot write job files atomically to {'/'.join(sorted(_protocols(fs)))}:// "
                         "(its writes fill a file in place); write to a local or mounted path, or to an object "
                         f"store ({', '.join(p + '://' for p in sorted(WHOLE_OBJECT_PROTOCOLS))})")


def exists(path: str) -> bool:
    """Whether a file or directory ``path`` exists.

    Parameters
    ----------
    path : str

    Returns
    -------
    bool
    """
    if not is_url(path):
        return os.path.exists(_local(path))
    fs, p = _filesystem(path)
    return fs.exists(p)


def isfile(path: str) -> bool:
    """Whether ``path`` is a file (an object, for an object store).

    Parameters
    ----------
    path : str

    Returns
    -------
    bool
    """
    if not is_url(path):
        return os.path.isfile(_local(path))
    fs, p = _filesystem(path)
    return fs.isfile(p)


def isdir(path: str) -> bool:
    """Whether ``path`` is a directory (for an object store: a prefix that holds objects).

    Parameters
    ----------
    path : str

    Returns
    -------
    bool
    """
    if not is_url(path):
        return os.path.isdir(_local(path))
    fs, p = _filesystem(path)
    return fs.isdir(p)


def list_names(directory: str, pattern: str) -> list[str]:
    """Sorted names (not paths) of the entries of ``directory`` that match a shell pattern.

    Matching is case-sensitive; a leading dot must be matched explicitly.

    Parameters
    ----------
    directory : str
        A local directory or a URL.
    pattern : str
        Shell pattern (:func:`fnmatch.fnmatchcase`).

    Returns
    -------
    list of str
        The matching names; ``[]`` when ``directory`` does not exist.
    """
    if not is_url(directory):
        try:
            names = os.listdir(_local(directory))
        except (FileNotFoundError, NotADirectoryError):
            return []
    else:
        fs, p = _filesystem(directory)
        fs.invalidate_cache(p)  # other jobs write here: list the store, not this process's cached listing
        try:
            entries = fs.ls(p, detail=True)
        except FileNotFoundError:
            return []
        names = [posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") != "directory"]
    hidden_ok = pattern.startswith(".")
    return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern) and (hidden_ok or not n.startswith(".")))


# -- reading ---------------------------------------------------------------------------------------------------
def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The bytes of the file ``path`` (its first ``limit`` bytes when given).

    Parameters
    ----------
    path : str
    limit : int, optional
        Most bytes to read.

    Returns
    -------
    bytes

    Raises
    ------
    OSError
        As :func:`open` does (``FileNotFoundError`` for a missing file).
    """
    if not is_url(path):
        with open(_local(path), "rb") as f:
            return f.read() if limit is None else f.read(limit)
    fs, p = _filesystem(path)
    return fs.cat_file(p, start=None if limit is None else 0, end=limit)


def read_json(path: str, what: str) -> Any:
    """The JSON content of the file ``path``.

    Local paths are read by :func:`mcacct.core.validate.read_json`.

    Parameters
    ----------
    path : str
    what : str
        What the file is, for messages (e.g. ``"statistics file"``).

    Returns
    -------
    object

    Raises
    ------
    ValueError
        Naming ``what`` and the path when the file cannot be read or is not valid JSON.
    """
    if not is_url(path):
        from mcacct.core.validate import read_json as read_local_json
        return read_local_json(_local(path), what)
    try:
        data = read_bytes(path)
    except OSError as err:
        why = "No such file or directory" if isinstance(err, FileNotFoundError) else (err.strerror or str(err))
        raise ValueError(f"{what} {path!r} cannot be read: {why}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} {path!r} is not valid JSON/UTF-8 (byte {err.start}: {err.reason})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} {path!r} is not valid JSON: {err}") from None
    except RecursionError:
        raise ValueError(f"{what} {path!r} nests arrays or objects deeper than JSON files of mcacct can "
                         "(a few hundred levels)") from None


# -- writing ---------------------------------------------------------------------------------------------------
def write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as compact JSON to ``path``, whole and atomically (:func:`write_bytes`).

    Parameters
    ----------
    path : str
    obj : object
        A JSON-serialisable value.

    Raises
    ------
    ValueError
        For a URL that cannot be written (:func:`check_url`).
    """
    write_bytes(path, json.dumps(obj, separators=(",", ":")).encode("utf-8"))  # the C encoder


def write_bytes(path: str, data: bytes) -> None:
    """Replace the file ``path`` by ``data`` atomically.

    A reader sees the previous content or ``data``, never a part (module docstring). A local path's directory is
    created if needed; a URL must be of a protocol of :data:`WHOLE_OBJECT_PROTOCOLS` (:func:`check_url`).

    Parameters
    ----------
    path : str
    data : bytes

    Raises
    ------
    ValueError
        For a URL that cannot be written (:func:`check_url`).
    """
    if not is_url(path):
        _write_local(_local(path), data)
        return
    check_url(path, write=True)
    fs, p = _filesystem(path)
    fs.pipe_file(p, data)  # one whole-object upload: published by the store when (and only if) it completes


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_stale_temporaries(path: str) -> None:
    """Remove ``.NAME.*.tmp`` files of ``path`` older than :data:`STALE_TMP_SECONDS`: a writer killed between
    creating its temporary file and the rename (SIGKILL, power loss) leaves one behind. A live writer holds its
    file for the time of one write and fsync, far below that age."""
    directory, name = os.path.split(os.path.abspath(path))
    now = time.time()
    for tmp in glob.glob(os.path.join(glob.escape(directory), "." + glob.escape(name) + ".*.tmp")):
        try:
            if now - os.stat(tmp).st_mtime > STALE_TMP_SECONDS:
                os.unlink(tmp)
        except OSError:  # gone already, or not ours to remove
            pass


def _write_local(path: str, data: bytes) -> None:
    """Temporary file in the same directory, flush + fsync, :func:`os.replace`, fsync of the directory."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass
