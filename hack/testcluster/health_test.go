package main

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, ready corev1.ConditionStatus) corev1.Node {
	n := fakeNode(name)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}
	return *n
}

func lease(name string, renewed time.Time) coordinationv1.Lease {
	t := metav1.NewMicroTime(renewed)
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &t},
	}
}

func TestHealthyNodesHaveNoProblems(t *testing.T) {
	now := time.Now()
	nodes := []corev1.Node{node("a", corev1.ConditionTrue), node("b", corev1.ConditionTrue)}
	leases := []coordinationv1.Lease{lease("a", now.Add(-5*time.Second)), lease("b", now.Add(-39*time.Second))}
	if p := nodeProblems(nodes, leases, 2, now, 40*time.Second); len(p) != 0 {
		t.Fatalf("want no problems, got %q", p)
	}
}

func TestEachUnhealthyNodeIsNamed(t *testing.T) {
	now := time.Now()
	realNode := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-ours"}}
	nodes := []corev1.Node{
		node("not-ready", corev1.ConditionUnknown),
		node("stale", corev1.ConditionTrue),
		node("no-lease", corev1.ConditionTrue),
		realNode,
	}
	leases := []coordinationv1.Lease{lease("not-ready", now), lease("stale", now.Add(-55*time.Second))}
	got := nodeProblems(nodes, leases, 4, now, 40*time.Second)
	want := []string{
		"3 of 4 fake nodes exist",
		"node no-lease has no renewed Lease in kube-node-lease",
		"node not-ready is not Ready (Ready=Unknown, NodeStatusUnknown: Kubelet stopped posting node status.)",
		"node stale: its Lease was last renewed 55s ago (at most 40s is healthy)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
