package fleet

import (
	"context"
	"fmt"
	"os"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reconcileJobs stands in for the job controller and the kubelet of a cluster without
// them (the hub): each Job that carries jobSelector's labels runs once, as a process, and
// gets the status the job controller would write when that process ends (Complete on
// exit code 0, Failed otherwise; no retries: the chart's Jobs have backoffLimit 0). Helm
// waits for exactly that status on a hook Job.
func (r *podRunner) reconcileJobs(ctx context.Context) error {
	jobs, err := r.cp.Kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: r.jobSelector})
	if err != nil {
		return err
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		key := "job/" + job.Namespace + "/" + job.Name + "/" + string(job.UID)
		if job.DeletionTimestamp != nil || jobFinished(job) {
			continue
		}
		r.mu.Lock()
		running, started := r.pods[key]
		r.mu.Unlock()
		if !started {
			pc, err := r.podCommand(ctx, job.Namespace, job.Name, job.Spec.Template.Spec)
			if err != nil || pc == nil {
				return err
			}
			if err := r.startPod(ctx, key, job.Namespace, job.Name, pc); err != nil {
				return err
			}
			continue
		}
		exited, exitErr := running.proc.Exited()
		if !exited {
			continue
		}
		setJobFinished(job, exitErr, metav1.Now())
		if _, err := r.cp.Kube.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("status of job %s/%s: %w", job.Namespace, job.Name, err)
		}
		fmt.Fprintf(os.Stderr, "fleet: job %s/%s on %s ended (%v)\n", job.Namespace, job.Name, r.cp.Name, exitErr)
		r.mu.Lock()
		r.sup.remove(running.proc, time.Second)
		delete(r.pods, key)
		r.mu.Unlock()
	}
	return nil
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// setJobFinished writes what the job controller writes for a Job whose one Pod ended: the
// interim condition (SuccessCriteriaMet or FailureTarget), then the final one, as the
// apiserver's validation of a Job's status requires.
func setJobFinished(job *batchv1.Job, exitErr error, now metav1.Time) {
	start := now
	if job.Status.StartTime != nil {
		start = *job.Status.StartTime
	}
	job.Status.StartTime = &start
	job.Status.Active = 0
	ready, terminating := int32(0), int32(0)
	job.Status.Ready, job.Status.Terminating = &ready, &terminating
	if exitErr == nil {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = append(job.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
				Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
				Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now})
		return
	}
	job.Status.Failed = 1
	message := fmt.Sprintf("the fleet's process of the Job's Pod ended: %v", exitErr)
	job.Status.Conditions = append(job.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
			Message: message, LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
			Message: message, LastProbeTime: now, LastTransitionTime: now})
}
