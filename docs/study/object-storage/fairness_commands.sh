# The eleventh part, fairness: every library's remote path through iobench against the library's own snippet, on
# one machine in one session, with the server as it now runs (no read-ahead). Each measurement in a process of its
# own, one cold epoch, s3-like, batch 256, interleaved rounds.
set -u
cd "$(dirname "$0")/../../.."
P=.venv/bin/python
[ -d /tmp/rall ] || .venv/bin/iobench prepare --size 4000 --formats all --data-dir /tmp/rall -q
[ -d /tmp/r500 ] || .venv/bin/iobench prepare --size 500 --formats hdf5,files --data-dir /tmp/r500 -q
uptime
$P scripts/bench_remote_formats.py /tmp/rall/n4000_128_float32_c1000_s0 --rounds 5 \
  --fairness litdata,webdataset,zarr,zarr-fsspec,npy-s3fs,arrow
uptime
$P scripts/bench_remote_formats.py /tmp/r500/n500_128_float32_c1000_s0 --rounds 3 --fairness hdf5,files
uptime
$P scripts/bench_remote_formats.py /tmp/rf/n100000_128_float32_c1000_s0 --rounds 3 --fairness litdata,webdataset,arrow
uptime
echo ALLDONE
