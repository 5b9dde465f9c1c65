// Command ms-kube is every program of the local control plane in one binary, chosen by the
// name it is called by (a symlink) or by its first argument: `ms-kube kube-apiserver --flags`.
// One binary links once, and the packages the programs share compile once, which is most of a
// cold build's time on a 2-core machine.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // CronJob time zones, as upstream's kube-apiserver and controller-manager

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	nodeinit "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

var programs = map[string]func() int{
	"etcd": func() int {
		etcdmain.Main(os.Args)
		return 0
	},
	"kube-apiserver": func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	// Without upstream's client-go auth-provider plugins (OIDC and the like): this cluster's
	// kubeconfigs hold client certificates.
	"kubectl": func() int {
		// As upstream's kubectl main: verbosity must be known before the command is built.
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
	"kwok":                runKwok,
	"kwok-default-stages": printKwokStages,
}

// runKwok is upstream's cmd/kwok main: the kwok controller alone, against any API server.
func runKwok() int {
	// Cobra merges pflag.CommandLine into every command, and the Kubernetes packages linked in
	// beside kwok put a non-boolean --version there, which breaks kwok's own --version (cobra
	// then refuses to execute at all). kwok needs none of those global flags.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	flags := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flags.ParseErrorsAllowlist.UnknownFlags = true
	flags.Usage = func() {}
	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flags)
	ctx, err := kwokconfig.InitFlags(ctx, flags)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flags.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flags)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}

// printKwokStages writes the stages kwokctl gives its clusters (node init, heartbeat with a
// lease, pod ready/complete/delete): standalone kwok has no default and simulates nothing
// without them. Printing upstream's embedded copies keeps them in step with the kwok version.
func printKwokStages() int {
	for _, stage := range []string{nodeinit.DefaultNodeInit, nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete} {
		fmt.Printf("---\n%s\n", strings.TrimSpace(stage))
	}
	return 0
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := programs[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	run, ok := programs[name]
	if !ok {
		names := make([]string, 0, len(programs))
		for n := range programs {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: ms-kube PROGRAM [ARGS...], PROGRAM one of %v\n", names)
		os.Exit(2)
	}
	os.Exit(run())
}
