set -u
cd /work/main
B=/work/venv/bin/iobench
R=/tmp/s9/formats_100k_readahead_off.jsonl
common="--cache cold --warmup 0 --runs 1 --batch-size 256 --max-seconds 30 --fuse-chunk 256K --data-dir /tmp/rf --device cpu --results $R"
for p in s3-like express-like; do
  uptime
  $B sweep --remote $p --format npy,memmap,lmdb --loader dataloader --num-workers 0,2 $common
  $B sweep --remote $p --format files --loader dataloader --num-workers 0,2 --fetch-threads 16 $common
  $B sweep --remote $p --format tfrecord,arrow,zarr --loader native --num-workers 0,2 $common
done
for p in s3-like express-like; do uptime; $B limits --remote $p --connections 64 --data-dir /tmp/rf --results $R; done
echo ALLDONE
set -u
cd /work/main
B="/work/venv/bin/python /tmp/s9/readahead_on.py"
R=/tmp/s9/formats_100k_readahead_on.jsonl
common="--cache cold --warmup 0 --runs 1 --batch-size 256 --max-seconds 30 --fuse-chunk 256K --data-dir /tmp/rf --device cpu --results $R"
for p in s3-like express-like; do
  uptime
  $B sweep --remote $p --format npy,memmap,lmdb --loader dataloader --num-workers 0,2 $common
  $B sweep --remote $p --format tfrecord --loader native --num-workers 0,2 $common
done
echo ALLDONE
