// Command visiond-bench runs the parts of `make bench` that need a running daemon, and writes
// the report. Each measuring subcommand starts a real `visiond run` process on a config file
// it writes (and rewrites, for reloads), serves the cameras itself (the sample video over
// RTSP on loopback, like a camera on the network), reads every detection event from the
// daemon's NATS server and polls its HTTP API; it writes what it measured as JSON.
//
//	visiond-bench env      -o env.json                 the machine and versions
//	visiond-bench scale    -o scale.json               cameras sustained at -fps with p99 latency under -p99
//	visiond-bench peer-scale -o peer-scale.json        the same search and criterion for scripts/bench/peer.py
//	visiond-bench overload -scale scale.json -o ...    twice that many cameras for -duration
//	visiond-bench soak     -o soak.json                -duration with cameras added and removed every -edit-every
//	visiond-bench clips    -cameras N -o clips.json    the daemon with clips off and on: CPU, ring memory, clip delay and bytes
//	visiond-bench memory   -cameras 1,16 -o mem.json   the memory of the daemon (by owner) and its workers at each camera count
//	visiond-bench measure  -cameras N -o ...           one window at N cameras (the visiond side of the peer comparison)
//	visiond-bench serve    -cameras N                  only the cameras, until killed (for scripts/bench/peer.py)
//	visiond-bench tensor   -o DIR                      a letterboxed image, its raw model output and visiond's detections (peer.py -selftest)
//	visiond-bench report   -in DIR [-gpu DIR] -o BENCHMARKS.md
//
// Everything is relative to the repository root, where `make bench` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
)

const usage = `usage: visiond-bench <env|scale|peer-scale|overload|soak|clips|memory|live|measure|serve|tensor|report> [flags]
(visiond-bench <command> -h lists the command's flags; scripts/bench/run.sh runs them all)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"env": envCmd, "scale": scaleCmd, "peer-scale": peerScaleCmd, "overload": overloadCmd, "soak": soakCmd, "clips": clipsCmd, "memory": memoryCmd, "live": liveCmd,
		"measure": measureCmd, "serve": serveCmd, "tensor": tensorCmd, "report": reportCmd,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "visiond-bench: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "visiond-bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
