package statusview

import (
	"strings"
	"testing"
)

func TestSummariseAnswers(t *testing.T) {
	clusterOf := func(node string) string {
		if c, _, ok := strings.Cut(node, "-zone"); ok && strings.HasPrefix(node, "cluster-") {
			return c
		}
		return ""
	}
	answers := []string{
		"web a zone=zone-a node=cluster-2-zone-a-0", "web b zone=zone-a node=cluster-2-zone-a-1",
		"web c zone=zone-b node=cluster-2-zone-b-0", "web d zone=zone-a node=cluster-1-zone-a-0",
		"", "something else",
	}
	got := SummariseAnswers(answers, clusterOf)
	want := "6 sent: cluster-2 50% (zone-a 33%, zone-b 17%), cluster-1 17% (zone-a 17%), 17% from no known Node, 17% unanswered"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if SummariseAnswers(nil, clusterOf) != "" {
		t.Error("no requests must show nothing")
	}
}
