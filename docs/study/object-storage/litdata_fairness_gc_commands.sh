# LitData's remote path against its own snippet, with the measurement's own diagnosis: the snippet also in a process
# that has imported what iobench's run imports (--same-heap), and every measurement with Python's garbage collector
# off (--no-gc). One cold epoch each, s3-like, batch 256, no workers, interleaved rounds.
set -u
cd "$(dirname "$0")/../../.."
P=.venv/bin/python
[ -d /tmp/rall ] || .venv/bin/iobench prepare --size 4000 --formats all --data-dir /tmp/rall -q
[ -d /tmp/rf ] || .venv/bin/iobench prepare --size 1e5 --formats litdata --data-dir /tmp/rf -q
uptime
$P scripts/bench_remote_formats.py /tmp/rall/n4000_128_float32_c1000_s0 --rounds 12 --fairness litdata --same-heap
uptime
$P scripts/bench_remote_formats.py /tmp/rall/n4000_128_float32_c1000_s0 --rounds 12 --fairness litdata --no-gc
uptime
$P scripts/bench_remote_formats.py /tmp/rf/n100000_128_float32_c1000_s0 --rounds 6 --fairness litdata
uptime
$P scripts/bench_remote_formats.py /tmp/rf/n100000_128_float32_c1000_s0 --rounds 6 --fairness litdata --no-gc
uptime
echo ALLDONE
