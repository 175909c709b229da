-- The database holds the rollout's invariants too, so a bug or a hand-written statement cannot
-- leave a ramp outside 0-100 or a pointer to a version that does not exist.
ALTER TABLE amber_workflow_types
    ADD CONSTRAINT amber_ramp_percent CHECK (ramp_percent BETWEEN 0 AND 100),
    ADD CONSTRAINT amber_current_exists FOREIGN KEY (current_digest) REFERENCES amber_modules (digest),
    ADD CONSTRAINT amber_candidate_exists FOREIGN KEY (candidate_digest) REFERENCES amber_modules (digest),
    ADD CONSTRAINT amber_previous_exists FOREIGN KEY (previous_digest) REFERENCES amber_modules (digest),
    ADD CONSTRAINT amber_upgrade_exists FOREIGN KEY (auto_upgrade_to) REFERENCES amber_modules (digest);
ALTER TABLE amber_version_labels
    ADD CONSTRAINT amber_label_target_exists FOREIGN KEY (digest) REFERENCES amber_modules (digest);
