package main

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// scheme holds every type the plugin reads: the built-in ones, the mcs-api's and fleetslice's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(mcsv1beta1.Install(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

// defaultRequestTimeout bounds each request, so an unreachable cluster fails with a message
// instead of hanging the command (kubectl itself waits forever by default).
const defaultRequestTimeout = 20 * time.Second

// loadConfig reads a kubeconfig as kubectl does: path, else $KUBECONFIG, else ~/.kube/config,
// with context overriding its current context.
func loadConfig(path, context string) (*rest.Config, error) {
	cfg, err := clientConfig(path, context).ClientConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultRequestTimeout
	}
	return cfg, nil
}

func clientConfig(path, context string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
}

// currentContext names the context a kubeconfig uses when none is given.
func currentContext(path string) (string, error) {
	raw, err := clientConfig(path, "").RawConfig()
	if err != nil {
		return "", err
	}
	if raw.CurrentContext == "" {
		return "", fmt.Errorf("the kubeconfig has no current context: name one with --context")
	}
	return raw.CurrentContext, nil
}

// newClient connects to the cluster of one kubeconfig context. The client finds resources
// lazily, so an unreachable cluster shows up as an error of the first request.
func newClient(path, context string) (client.Client, error) {
	cfg, err := loadConfig(path, context)
	if err != nil {
		if context != "" {
			return nil, fmt.Errorf("kubeconfig context %q: %w", context, err)
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return c, nil
}
