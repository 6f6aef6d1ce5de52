# The eleventh part, continued: LitData in 14 chunks of 4 MiB (its default 64 MB makes this dataset one chunk,
# which LitData 0.2.76 reads pathologically slowly with workers), and every format feeding a 50 ms step per batch
# of 256 from s3-like with 2 workers (accelerator utilisation; 5,120 samples/s keep it busy).
set -u
cd "$(dirname "$0")/../../.."
B=.venv/bin/iobench
common="--cache cold --warmup 0 --runs 1 --batch-size 256 --max-seconds 30 --fuse-chunk 256K --device cpu"
[ -d /tmp/rlc ] || $B prepare --size 1e5 --formats litdata --format-option litdata.chunk_bytes=4M --data-dir /tmp/rlc -q
R=/tmp/s11/litdata_chunks_100k.jsonl
for order in --shuffle --no-shuffle; do
  for p in s3-like express-like; do
    uptime
    $B sweep --remote $p --format litdata --loader native --num-workers 0,2 $order $common --data-dir /tmp/rlc --results $R
  done
done
R=/tmp/s11/step50_100k.jsonl
uptime
$B sweep --remote s3-like --format npy,memmap,hdf5,lmdb --loader dataloader --num-workers 2 --step sleep:50 $common --data-dir /tmp/rf --results $R
$B sweep --remote s3-like --format files --loader dataloader --num-workers 2 --fetch-threads 16 --step sleep:50 $common --data-dir /tmp/rf --results $R
$B sweep --remote s3-like --format litdata,webdataset,zarr,arrow,tfrecord --loader native --num-workers 2 --step sleep:50 $common --data-dir /tmp/rf --results $R
$B sweep --remote s3-like --format litdata --loader native --num-workers 2 --step sleep:50 $common --data-dir /tmp/rlc --results $R
uptime
echo ALLDONE
# (before 9f1e475 the last sweep above was skipped as "already" measured: both datasets have one folder name; run
# again after it, as its own configuration)
