# The eleventh part: every format at 100,000 rows, shuffled and in storage order, s3-like and express-like, 0 and
# 2 workers, with the server as it now runs (no read-ahead); ceilings first, so the records carry their share.
set -u
cd "$(dirname "$0")/../../.."
B=.venv/bin/iobench
R=/tmp/s11/formats_100k_orders.jsonl
common="--cache cold --warmup 0 --runs 1 --batch-size 256 --max-seconds 30 --fuse-chunk 256K --data-dir /tmp/rf --device cpu --results $R"
for p in s3-like express-like; do uptime; $B limits --remote $p --connections 64 --data-dir /tmp/rf --results $R; done
for order in --shuffle --no-shuffle; do
  for p in s3-like express-like; do
    uptime
    $B sweep --remote $p --format npy,memmap,hdf5,lmdb,files --loader dataloader --num-workers 0,2 $order $common
    $B sweep --remote $p --format files --loader dataloader --num-workers 0,2 --fetch-threads 16 $order $common
    $B sweep --remote $p --format litdata,webdataset,zarr,arrow,tfrecord --loader native --num-workers 0,2 $order $common
  done
done
uptime
echo ALLDONE
