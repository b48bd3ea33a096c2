"""The main job: ``factcheck run`` end to end (:mod:`factcheck.pipeline.run`), built from
the training (:mod:`factcheck.training`), system (:mod:`factcheck.system`) and
reporting (:mod:`factcheck.reporting`) layers."""
