#!/usr/bin/env bash
# The three rows searches of ../run.sh again after the DataLoader stopped carrying indices as a third tensor
# (a7cc757): tune's default 5 minutes each, warm, batch 256; every pasted script is run once there, and was
# then run twice more by hand (`python OUT/NAME-best.py | grep ^epoch >> OUT/NAME-pasted.txt`), so each
# *-pasted.txt holds one warm-up and six timed epochs from three processes.
# Usage: run.sh DATA OUT (DATA holds tabular/ as docs/study/shard-formats/images-and-rows/run.sh left it)
exec "$(dirname "$0")/../run.sh" "$1" "$2" rows-litdata rows-litdata-speed rows-webdataset
