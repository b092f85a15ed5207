"""Constants: change-event field names and operation types, as the server spells them."""

from __future__ import annotations

from typing import Final

from shardstream import resume_token

ID: Final = "_id"
OPERATION_TYPE: Final = "operationType"
CLUSTER_TIME: Final = "clusterTime"
COMMIT_TIMESTAMP: Final = "commitTimestamp"
COLLECTION_UUID: Final = "collectionUUID"
WALL_TIME: Final = "wallTime"
FULL_DOCUMENT: Final = "fullDocument"
FULL_DOCUMENT_BEFORE_CHANGE: Final = "fullDocumentBeforeChange"
NS: Final = "ns"
DOCUMENT_KEY: Final = "documentKey"
OPERATION_DESCRIPTION: Final = "operationDescription"
UPDATE_DESCRIPTION: Final = "updateDescription"
RAW_UPDATE_DESCRIPTION: Final = "rawUpdateDescription"
STATE_BEFORE_CHANGE: Final = "stateBeforeChange"
NS_TYPE: Final = "nsType"
TO: Final = "to"
RESHARDING_UUID: Final = "reshardingUUID"
TXN_NUMBER: Final = "txnNumber"
LSID: Final = "lsid"
SPLIT_EVENT: Final = "splitEvent"

# Fields the unwind stage adds to each op taken out of an applyOps entry.
TXN_OP_INDEX: Final = "txnOpIndex"
APPLY_OPS_INDEX: Final = "applyOpsIndex"
APPLY_OPS_TS: Final = "applyOpsTs"

INSERT: Final = "insert"
UPDATE: Final = "update"
REPLACE: Final = "replace"
DELETE: Final = "delete"
DROP: Final = "drop"
RENAME: Final = "rename"
DROP_DATABASE: Final = "dropDatabase"
INVALIDATE: Final = "invalidate"
CREATE: Final = "create"
CREATE_INDEXES: Final = "createIndexes"
DROP_INDEXES: Final = "dropIndexes"
MODIFY: Final = "modify"
SHARD_COLLECTION: Final = "shardCollection"
REFINE_COLLECTION_SHARD_KEY: Final = "refineCollectionShardKey"
RESHARD_COLLECTION: Final = "reshardCollection"
MIGRATE_LAST_CHUNK_FROM_SHARD: Final = "migrateLastChunkFromShard"
NEW_SHARD_DETECTED: Final = "migrateChunkToNewShard"
NEW_SHARD_DETECTED_LEGACY: Final = "kNewShardDetected"  # 6.0, and any v1 token
# Both spellings of the new-shard event (which one a stream uses depends on its version).
NEW_SHARD_EVENTS: Final = frozenset({NEW_SHARD_DETECTED, NEW_SHARD_DETECTED_LEGACY})
RESHARD_BEGIN: Final = "reshardBegin"
RESHARD_DONE_CATCH_UP: Final = "reshardDoneCatchUp"
END_OF_TRANSACTION: Final = "endOfTransaction"

# What a stream without showExpandedEvents lets through: the server's kClassicOperationTypes,
# whose new-shard event is named by token version, so both names are here.
CLASSIC_OPERATION_TYPES: Final = resume_token.CLASSIC_OPERATION_TYPES | {NEW_SHARD_DETECTED}
