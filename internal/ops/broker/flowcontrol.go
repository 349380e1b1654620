package broker

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The broker's API Priority and Fairness objects give members' requests a priority level of
// their own, with one fair queue per member identity: a member running its bulk sync (joining,
// or every manager restarting) fills its own queues, and another member's single endpoint change
// is served in between instead of after it. Lease renewals get a level of their own, so even a
// member's own bulk sync cannot delay the renewal that keeps it alive in its peers' eyes.
// Cluster-scoped, so the names carry the namespace: one broker may serve several ClusterSets.
func memberFlowNames(namespace string) (requests, leases string) {
	return "fleetslice-members." + namespace, "fleetslice-member-leases." + namespace
}

func flowControlObjects(namespace string) []client.Object {
	requests, leases := memberFlowNames(namespace)
	members := []flowcontrolv1.Subject{{
		Kind:           flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: namespace, Name: "*"},
	}}
	everything := flowcontrolv1.PolicyRulesWithSubjects{
		Subjects: members,
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
			Namespaces: []string{namespace}, ClusterScope: true,
		}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
	leaseRule := flowcontrolv1.PolicyRulesWithSubjects{
		Subjects: members,
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: []string{"get", "create", "update", "patch"}, APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"}, Namespaces: []string{namespace},
		}},
	}
	return []client.Object{
		priorityLevel(requests, 40, 64, 6, 100),
		priorityLevel(leases, 5, 16, 4, 50),
		flowSchema(leases, leases, 500, leaseRule),
		flowSchema(requests, requests, 5000, everything),
	}
}

func priorityLevel(name string, shares, queues, handSize, queueLength int32) *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "flowcontrol.apiserver.k8s.io/v1", Kind: "PriorityLevelConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To(shares),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type:    flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: handSize, QueueLengthLimit: queueLength},
				},
			},
		},
	}
}

// flowSchema routes rule's requests to the priority level, one flow per member identity.
// matchingPrecedence below the built-in service-accounts schema (9000) makes it apply first.
func flowSchema(name, level string, precedence int32, rule flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{
		TypeMeta:   metav1.TypeMeta{APIVersion: "flowcontrol.apiserver.k8s.io/v1", Kind: "FlowSchema"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         precedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
		},
	}
}
