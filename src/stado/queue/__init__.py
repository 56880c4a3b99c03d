"""The queue and what each job carries: submitting (submission, and a submission's own key: submitkeys), reading
a job (lookup), the claim-order index (readyindex), cron schedules (schedules), the queue's pause (pause), a
submission's uploaded inputs (uploads), and a job's artifacts, output and checkpoints.
"""
