package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// checkNodes reports, as one error, every fake node that is not Ready or whose Lease in
// kube-node-lease is missing or older than maxLeaseAge, and fewer than want fake nodes.
// A node that is Ready now but lacks a fresh Lease turns NotReady within the node lifecycle
// controller's grace period, taking its Pods' readiness with it.
func checkNodes(ctx context.Context, client *kubernetes.Clientset, want int, maxLeaseAge time.Duration) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	leases, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Leases in %s: %w", corev1.NamespaceNodeLease, err)
	}
	problems := nodeProblems(nodes.Items, leases.Items, want, time.Now(), maxLeaseAge)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// nodeProblems is what checkNodes reports, one entry per problem, given the cluster's nodes and
// node Leases at time now. Nodes that kwok does not manage are left out.
func nodeProblems(nodes []corev1.Node, leases []coordinationv1.Lease, want int, now time.Time, maxLeaseAge time.Duration) []string {
	renewed := make(map[string]time.Time, len(leases))
	for _, l := range leases {
		if l.Spec.RenewTime != nil {
			renewed[l.Name] = l.Spec.RenewTime.Time
		}
	}
	var problems []string
	fake := 0
	for _, n := range nodes {
		if n.Annotations[fakeNodeAnnotation] != "fake" {
			continue
		}
		fake++
		if reason := notReady(n); reason != "" {
			problems = append(problems, fmt.Sprintf("node %s is not Ready (%s)", n.Name, reason))
		}
		last, ok := renewed[n.Name]
		switch age := now.Sub(last).Round(time.Second); {
		case !ok:
			problems = append(problems, fmt.Sprintf("node %s has no renewed Lease in %s", n.Name, corev1.NamespaceNodeLease))
		case age > maxLeaseAge:
			problems = append(problems, fmt.Sprintf("node %s: its Lease was last renewed %s ago (at most %s is healthy)", n.Name, age, maxLeaseAge))
		}
	}
	if fake < want {
		problems = append(problems, fmt.Sprintf("%d of %d fake nodes exist", fake, want))
	}
	sort.Strings(problems)
	return problems
}

// notReady says why node n is not Ready, or returns "" when it is.
func notReady(n corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		why := "Ready=" + string(c.Status)
		if c.Reason != "" {
			why += ", " + c.Reason
		}
		if c.Message != "" {
			why += ": " + c.Message
		}
		return why
	}
	return "no Ready condition yet"
}
