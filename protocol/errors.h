/*
 * errors.h: Kafka's error codes as one table (code, name, retriable, default message), the values of
 * org.apache.kafka.common.protocol.Errors. Handlers put GR_ERR_* values in error_code fields.
 * Read next: server/handlers/.
 */
#ifndef GR_ERRORS_H
#define GR_ERRORS_H

#include <stdbool.h>
#include <stdint.h>

/* X(code, NAME, retriable, default message) */
#define GR_ERRORS(X)                                                                                         \
    X(-1, UNKNOWN_SERVER_ERROR, false,                                                                       \
      "The server experienced an unexpected error when processing the request.")                             \
    X(0, NONE, false, "")                                                                                    \
    X(1, OFFSET_OUT_OF_RANGE, false,                                                                         \
      "The requested offset is not within the range of offsets maintained by the server.")                   \
    X(2, CORRUPT_MESSAGE, true,                                                                              \
      "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted "    \
      "topic, or is otherwise corrupt.")                                                                     \
    X(3, UNKNOWN_TOPIC_OR_PARTITION, true, "This server does not host this topic-partition.")                \
    X(4, INVALID_FETCH_SIZE, false, "The requested fetch size is invalid.")                                  \
    X(5, LEADER_NOT_AVAILABLE, true,                                                                         \
      "There is no leader for this topic-partition as we are in the middle of a leadership election.")       \
    X(6, NOT_LEADER_OR_FOLLOWER, true,                                                                       \
      "For requests intended only for the leader, this error indicates that the broker is not the current "  \
      "leader.")                                                                                             \
    X(7, REQUEST_TIMED_OUT, true, "The request timed out.")                                                  \
    X(8, BROKER_NOT_AVAILABLE, false, "The broker is not available.")                                        \
    X(9, REPLICA_NOT_AVAILABLE, true, "The replica is not available for the requested topic-partition.")     \
    X(10, MESSAGE_TOO_LARGE, false,                                                                          \
      "The request included a message larger than the max message size the server will accept.")             \
    X(11, STALE_CONTROLLER_EPOCH, false, "The controller moved to another broker.")                          \
    X(12, OFFSET_METADATA_TOO_LARGE, false, "The metadata field of the offset request was too large.")       \
    X(13, NETWORK_EXCEPTION, true, "The server disconnected before a response was received.")                \
    X(14, COORDINATOR_LOAD_IN_PROGRESS, true,                                                                \
      "The coordinator is loading and hence can't process requests.")                                        \
    X(15, COORDINATOR_NOT_AVAILABLE, true, "The coordinator is not available.")                              \
    X(16, NOT_COORDINATOR, true, "This is not the correct coordinator.")                                     \
    X(17, INVALID_TOPIC_EXCEPTION, false,                                                                    \
      "The request attempted to perform an operation on an invalid topic.")                                  \
    X(18, RECORD_LIST_TOO_LARGE, false,                                                                      \
      "The request included message batch larger than the configured segment size on the server.")           \
    X(19, NOT_ENOUGH_REPLICAS, true,                                                                         \
      "Messages are rejected since there are fewer in-sync replicas than required.")                         \
    X(20, NOT_ENOUGH_REPLICAS_AFTER_APPEND, true,                                                            \
      "Messages are written to the log, but to fewer in-sync replicas than required.")                       \
    X(21, INVALID_REQUIRED_ACKS, false, "Produce request specified an invalid value for required acks.")     \
    X(22, ILLEGAL_GENERATION, false, "Specified group generation id is not valid.")                          \
    X(23, INCONSISTENT_GROUP_PROTOCOL, false,                                                                \
      "The group member's supported protocols are incompatible with those of existing members or first "     \
      "group member tried to join with empty protocol type or empty protocol list.")                         \
    X(24, INVALID_GROUP_ID, false, "The configured groupId is invalid.")                                     \
    X(25, UNKNOWN_MEMBER_ID, false, "The coordinator is not aware of this member.")                          \
    X(26, INVALID_SESSION_TIMEOUT, false,                                                                    \
      "The session timeout is not within the range allowed by the broker (as configured by "                 \
      "group.min.session.timeout.ms and group.max.session.timeout.ms).")                                     \
    X(27, REBALANCE_IN_PROGRESS, false, "The group is rebalancing, so a rejoin is needed.")                  \
    X(28, INVALID_COMMIT_OFFSET_SIZE, false, "The committing offset data size is not valid.")                \
    X(29, TOPIC_AUTHORIZATION_FAILED, false, "Topic authorization failed.")                                  \
    X(30, GROUP_AUTHORIZATION_FAILED, false, "Group authorization failed.")                                  \
    X(31, CLUSTER_AUTHORIZATION_FAILED, false, "Cluster authorization failed.")                              \
    X(32, INVALID_TIMESTAMP, false, "The timestamp of the message is out of acceptable range.")              \
    X(33, UNSUPPORTED_SASL_MECHANISM, false, "The broker does not support the requested SASL mechanism.")    \
    X(34, ILLEGAL_SASL_STATE, false, "Request is not valid given the current SASL state.")                   \
    X(35, UNSUPPORTED_VERSION, false, "The version of API is not supported.")                                \
    X(36, TOPIC_ALREADY_EXISTS, false, "Topic with this name already exists.")                               \
    X(37, INVALID_PARTITIONS, false, "Number of partitions is below 1.")                                     \
    X(38, INVALID_REPLICATION_FACTOR, false,                                                                 \
      "Replication factor is below 1 or larger than the number of available brokers.")                       \
    X(39, INVALID_REPLICA_ASSIGNMENT, false, "Replica assignment is invalid.")                               \
    X(40, INVALID_CONFIG, false, "Configuration is invalid.")                                                \
    X(41, NOT_CONTROLLER, true, "This is not the correct controller for this cluster.")                      \
    X(42, INVALID_REQUEST, false,                                                                            \
      "This most likely occurs because of a request being malformed by the client library or the message "   \
      "was sent to an incompatible broker. See the broker logs for more details.")                           \
    X(43, UNSUPPORTED_FOR_MESSAGE_FORMAT, false,                                                             \
      "The message format version on the broker does not support the request.")                              \
    X(44, POLICY_VIOLATION, false, "Request parameters do not satisfy the configured policy.")               \
    X(45, OUT_OF_ORDER_SEQUENCE_NUMBER, false, "The broker received an out of order sequence number.")       \
    X(46, DUPLICATE_SEQUENCE_NUMBER, false, "The broker received a duplicate sequence number.")              \
    X(47, INVALID_PRODUCER_EPOCH, false, "Producer attempted to produce with an old epoch.")                 \
    X(48, INVALID_TXN_STATE, false, "The producer attempted a transactional operation in an invalid state.") \
    X(49, INVALID_PRODUCER_ID_MAPPING, false,                                                                \
      "The producer attempted to use a producer id which is not currently assigned to its transactional "    \
      "id.")                                                                                                 \
    X(50, INVALID_TRANSACTION_TIMEOUT, false,                                                                \
      "The transaction timeout is larger than the maximum value allowed by the broker (as configured by "    \
      "transaction.max.timeout.ms).")                                                                        \
    X(51, CONCURRENT_TRANSACTIONS, true,                                                                     \
      "The producer attempted to update a transaction while another concurrent operation on the same "       \
      "transaction was ongoing.")                                                                            \
    X(52, TRANSACTION_COORDINATOR_FENCED, false,                                                             \
      "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current "        \
      "coordinator for a given producer.")                                                                   \
    X(53, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, false, "Transactional Id authorization failed.")            \
    X(54, SECURITY_DISABLED, false, "Security features are disabled.")                                       \
    X(55, OPERATION_NOT_ATTEMPTED, false, "The broker did not attempt to execute this operation.")           \
    X(56, KAFKA_STORAGE_ERROR, true, "Disk error when trying to access log file on the disk.")               \
    X(57, LOG_DIR_NOT_FOUND, false, "The user-specified log directory is not found in the broker config.")   \
    X(58, SASL_AUTHENTICATION_FAILED, false, "SASL Authentication failed.")                                  \
    X(59, UNKNOWN_PRODUCER_ID, false,                                                                        \
      "This exception is raised by the broker if it could not locate the producer metadata associated with " \
      "the producerId in question.")                                                                         \
    X(60, REASSIGNMENT_IN_PROGRESS, false, "A partition reassignment is in progress.")                       \
    X(61, DELEGATION_TOKEN_AUTH_DISABLED, false, "Delegation Token feature is not enabled.")                 \
    X(62, DELEGATION_TOKEN_NOT_FOUND, false, "Delegation Token is not found on server.")                     \
    X(63, DELEGATION_TOKEN_OWNER_MISMATCH, false, "Specified Principal is not valid Owner/Renewer.")         \
    X(64, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, false,                                                       \
      "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token "   \
      "authenticated channels.")                                                                             \
    X(65, DELEGATION_TOKEN_AUTHORIZATION_FAILED, false, "Delegation Token authorization failed.")            \
    X(66, DELEGATION_TOKEN_EXPIRED, false, "Delegation Token is expired.")                                   \
    X(67, INVALID_PRINCIPAL_TYPE, false, "Supplied principalType is not supported.")                         \
    X(68, NON_EMPTY_GROUP, false, "The group is not empty.")                                                 \
    X(69, GROUP_ID_NOT_FOUND, false, "The group id does not exist.")                                         \
    X(70, FETCH_SESSION_ID_NOT_FOUND, true, "The fetch session ID was not found.")                           \
    X(71, INVALID_FETCH_SESSION_EPOCH, true, "The fetch session epoch is invalid.")                          \
    X(72, LISTENER_NOT_FOUND, true,                                                                          \
      "There is no listener on the leader broker that matches the listener on which metadata request was "   \
      "processed.")                                                                                          \
    X(73, TOPIC_DELETION_DISABLED, false, "Topic deletion is disabled.")                                     \
    X(74, FENCED_LEADER_EPOCH, true,                                                                         \
      "The leader epoch in the request is older than the epoch on the broker.")                              \
    X(75, UNKNOWN_LEADER_EPOCH, true,                                                                        \
      "The leader epoch in the request is newer than the epoch on the broker.")                              \
    X(76, UNSUPPORTED_COMPRESSION_TYPE, false,                                                               \
      "The requesting client does not support the compression type of given partition.")                     \
    X(77, STALE_BROKER_EPOCH, false, "Broker epoch has changed.")                                            \
    X(78, OFFSET_NOT_AVAILABLE, true,                                                                        \
      "The leader high watermark has not caught up from a recent leader election so the offsets cannot be "  \
      "guaranteed to be monotonically increasing.")                                                          \
    X(79, MEMBER_ID_REQUIRED, false,                                                                         \
      "The group member needs to have a valid member id before actually entering a consumer group.")         \
    X(80, PREFERRED_LEADER_NOT_AVAILABLE, true, "The preferred leader was not available.")                   \
    X(81, GROUP_MAX_SIZE_REACHED, false, "The group has reached its maximum size.")                          \
    X(82, FENCED_INSTANCE_ID, false,                                                                         \
      "The broker rejected this static consumer since another consumer with the same group.instance.id has " \
      "registered with a different member.id.")                                                              \
    X(83, ELIGIBLE_LEADERS_NOT_AVAILABLE, true, "Eligible topic partition leaders are not available.")       \
    X(84, ELECTION_NOT_NEEDED, true, "Leader election not needed for topic partition.")                      \
    X(85, NO_REASSIGNMENT_IN_PROGRESS, false, "No partition reassignment is in progress.")                   \
    X(86, GROUP_SUBSCRIBED_TO_TOPIC, false,                                                                  \
      "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.")     \
    X(87, INVALID_RECORD, false,                                                                             \
      "This record has failed the validation on broker and hence will be rejected.")                         \
    X(88, UNSTABLE_OFFSET_COMMIT, true, "There are unstable offsets that need to be cleared.")               \
    X(89, THROTTLING_QUOTA_EXCEEDED, true, "The throttling quota has been exceeded.")                        \
    X(90, PRODUCER_FENCED, false,                                                                            \
      "There is a newer producer with the same transactionalId which fences the current one.")               \
    X(91, RESOURCE_NOT_FOUND, false, "A request illegally referred to a resource that does not exist.")      \
    X(92, DUPLICATE_RESOURCE, false, "A request illegally referred to the same resource twice.")             \
    X(93, UNACCEPTABLE_CREDENTIAL, false, "Requested credential would not meet criteria for acceptability.") \
    X(94, INCONSISTENT_VOTER_SET, false,                                                                     \
      "Indicates that the either the sender or recipient of a voter-only request is not one of the "         \
      "expected voters.")                                                                                    \
    X(95, INVALID_UPDATE_VERSION, false, "The given update version was invalid.")                            \
    X(96, FEATURE_UPDATE_FAILED, false,                                                                      \
      "Unable to update finalized features due to an unexpected server error.")                              \
    X(97, PRINCIPAL_DESERIALIZATION_FAILURE, false,                                                          \
      "Request principal deserialization failed during forwarding.")                                         \
    X(98, SNAPSHOT_NOT_FOUND, false, "Requested snapshot was not found.")                                    \
    X(99, POSITION_OUT_OF_RANGE, false,                                                                      \
      "Requested position is not greater than or equal to zero, and less than the size of the snapshot.")    \
    X(100, UNKNOWN_TOPIC_ID, true, "This server does not host this topic ID.")                               \
    X(101, DUPLICATE_BROKER_REGISTRATION, false, "This broker ID is already in use.")                        \
    X(102, BROKER_ID_NOT_REGISTERED, false, "The given broker ID was not registered.")                       \
    X(103, INCONSISTENT_TOPIC_ID, true, "The log's topic ID did not match the topic ID in the request.")     \
    X(104, INCONSISTENT_CLUSTER_ID, false,                                                                   \
      "The clusterId in the request does not match that found on the server.")                               \
    X(105, TRANSACTIONAL_ID_NOT_FOUND, false, "The transactionalId could not be found.")                     \
    X(106, FETCH_SESSION_TOPIC_ID_ERROR, true, "The fetch session encountered inconsistent topic ID usage.") \
    X(107, INELIGIBLE_REPLICA, false, "The new ISR contains at least one ineligible replica.")               \
    X(108, NEW_LEADER_ELECTED, false,                                                                        \
      "The AlterPartition request successfully updated the partition state but the leader has changed.")     \
    X(109, OFFSET_MOVED_TO_TIERED_STORAGE, false, "The requested offset is moved to tiered storage.")        \
    X(110, FENCED_MEMBER_EPOCH, false, "The member epoch is fenced by the group coordinator.")               \
    X(111, UNRELEASED_INSTANCE_ID, false,                                                                    \
      "The instance ID is still used by another member in the consumer group.")                              \
    X(112, UNSUPPORTED_ASSIGNOR, false,                                                                      \
      "The assignor or its version range is not supported by the consumer group.")                           \
    X(113, STALE_MEMBER_EPOCH, false, "The member epoch is stale.")                                          \
    X(114, MISMATCHED_ENDPOINT_TYPE, false, "The request was sent to an endpoint of the wrong type.")        \
    X(115, UNSUPPORTED_ENDPOINT_TYPE, false, "This endpoint type is not supported yet.")                     \
    X(116, UNKNOWN_CONTROLLER_ID, false, "This controller ID is not known.")                                 \
    X(117, UNKNOWN_SUBSCRIPTION_ID, false,                                                                   \
      "Client sent a push telemetry request with an invalid or outdated subscription ID.")                   \
    X(118, TELEMETRY_TOO_LARGE, false,                                                                       \
      "Client sent a push telemetry request larger than the maximum size the broker will accept.")           \
    X(119, INVALID_REGISTRATION, false,                                                                      \
      "The controller has considered the broker registration to be invalid.")                                \
    X(120, TRANSACTION_ABORTABLE, false,                                                                     \
      "The server encountered an error with the transaction. The client can abort the transaction to "       \
      "continue using this transactional ID.")                                                               \
    X(121, INVALID_RECORD_STATE, false,                                                                      \
      "The record state is invalid. The acknowledgement of delivery could not be completed.")                \
    X(122, SHARE_SESSION_NOT_FOUND, true, "The share session was not found.")                                \
    X(123, INVALID_SHARE_SESSION_EPOCH, true, "The share session epoch is invalid.")                         \
    X(124, FENCED_STATE_EPOCH, false,                                                                        \
      "The coordinator rejected the request because the state epoch did not match.")                         \
    X(125, INVALID_VOTER_KEY, false, "The voter key doesn't match the receiving replica's key.")             \
    X(126, DUPLICATE_VOTER, false, "The voter is already part of the set of voters.")                        \
    X(127, VOTER_NOT_FOUND, false, "The voter is not part of the set of voters.")                            \
    X(128, INVALID_REGULAR_EXPRESSION, false, "The regular expression is not valid.")                        \
    X(129, REBOOTSTRAP_REQUIRED, false,                                                                      \
      "Client metadata is stale. The client should rebootstrap to obtain new metadata.")                     \
    X(130, STREAMS_INVALID_TOPOLOGY, false, "The supplied topology is invalid.")                             \
    X(131, STREAMS_INVALID_TOPOLOGY_EPOCH, false, "The supplied topology epoch is invalid.")                 \
    X(132, STREAMS_TOPOLOGY_FENCED, false, "The supplied topology epoch is outdated.")                       \
    X(133, SHARE_SESSION_LIMIT_REACHED, true, "The limit of share sessions has been reached.")               \
    X(134, GROUP_DELETION_FAILED, false,                                                                     \
      "DeleteGroups could not complete; see the error message on the per-group result for details.")

enum gr_error {
#define GR_ERR_ENUM(code, name, retriable, msg) GR_ERR_##name = code,
    GR_ERRORS(GR_ERR_ENUM)
#undef GR_ERR_ENUM
};

/* Kafka's name of an error code ("UNKNOWN_TOPIC_OR_PARTITION"), or "UNKNOWN" for codes not in the table. */
const char *gr_error_name(int16_t code);
/* Kafka's default message for an error code ("" for NONE). */
const char *gr_error_message(int16_t code);
/* Whether Kafka marks the error retriable (a RetriableException subclass). */
bool gr_error_retriable(int16_t code);

#endif
