// dawn_api.h: our own declarations of the part of Dawn's C API that wgpt uses,
// matching the pinned build: the Dawn inside npm webgpu@0.6.2's dawn.node
// (Dawn commit 77f9a9aa5f71, 2026). Enum values move between Dawn versions, so
// every value here was read off that build, and src/gpu/dawn_loader.c checks
// them against the build itself at load time (feature names through Dawn's own
// feature table, struct sizes through the bytes Dawn writes).
// The functions are pointers filled by dawn_loader.c; only src/gpu/*.c include this file.
#ifndef WGPT_DAWN_API_H
#define WGPT_DAWN_API_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

typedef struct WGPUInstanceImpl *WGPUInstance;
typedef struct WGPUAdapterImpl *WGPUAdapter;
typedef struct WGPUDeviceImpl *WGPUDevice;
typedef struct WGPUQueueImpl *WGPUQueue;
typedef struct WGPUBufferImpl *WGPUBuffer;
typedef struct WGPUShaderModuleImpl *WGPUShaderModule;
typedef struct WGPUComputePipelineImpl *WGPUComputePipeline;
typedef struct WGPUBindGroupLayoutImpl *WGPUBindGroupLayout;
typedef struct WGPUBindGroupImpl *WGPUBindGroup;
typedef struct WGPUPipelineLayoutImpl *WGPUPipelineLayout;
typedef struct WGPUCommandEncoderImpl *WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl *WGPUComputePassEncoder;
typedef struct WGPUCommandBufferImpl *WGPUCommandBuffer;
typedef struct WGPUQuerySetImpl *WGPUQuerySet;
typedef struct WGPUSurfaceImpl *WGPUSurface;
typedef struct WGPUSamplerImpl *WGPUSampler;
typedef struct WGPUTextureViewImpl *WGPUTextureView;

#define WGPU_STRLEN SIZE_MAX
#define WGPU_WHOLE_SIZE UINT64_MAX
#define WGPU_QUERY_SET_INDEX_UNDEFINED UINT32_MAX

typedef struct WGPUStringView {
    const char *data;
    size_t length;  // WGPU_STRLEN: nul-terminated
} WGPUStringView;

typedef struct WGPUFuture {
    uint64_t id;
} WGPUFuture;

typedef enum WGPUSType {
    WGPUSType_ShaderSourceWGSL = 0x00000002,
    WGPUSType_DawnCacheDeviceDescriptor = 0x00050007,
    WGPUSType_DawnTogglesDescriptor = 0x0005000A,
    WGPUSType_AdapterPropertiesSubgroupMatrixConfigs = 0x0005003B,
    WGPUSType_Force32 = 0x7FFFFFFF
} WGPUSType;

typedef struct WGPUChainedStruct {
    struct WGPUChainedStruct *next;
    WGPUSType sType;
} WGPUChainedStruct;

typedef enum WGPUStatus { WGPUStatus_Success = 1, WGPUStatus_Error = 2, WGPUStatus_Force32 = 0x7FFFFFFF } WGPUStatus;

typedef enum WGPUCallbackMode {
    WGPUCallbackMode_WaitAnyOnly = 1,
    WGPUCallbackMode_AllowProcessEvents = 2,
    WGPUCallbackMode_AllowSpontaneous = 3,
    WGPUCallbackMode_Force32 = 0x7FFFFFFF
} WGPUCallbackMode;

typedef enum WGPUBackendType {
    WGPUBackendType_Undefined = 0,
    WGPUBackendType_Null = 1,
    WGPUBackendType_WebGPU = 2,
    WGPUBackendType_D3D11 = 3,
    WGPUBackendType_D3D12 = 4,
    WGPUBackendType_Metal = 5,
    WGPUBackendType_Vulkan = 6,
    WGPUBackendType_OpenGL = 7,
    WGPUBackendType_OpenGLES = 8,
    WGPUBackendType_Force32 = 0x7FFFFFFF
} WGPUBackendType;

typedef enum WGPUAdapterType {
    WGPUAdapterType_DiscreteGPU = 1,
    WGPUAdapterType_IntegratedGPU = 2,
    WGPUAdapterType_CPU = 3,
    WGPUAdapterType_Unknown = 4,
    WGPUAdapterType_Force32 = 0x7FFFFFFF
} WGPUAdapterType;

typedef enum WGPUFeatureLevel {
    WGPUFeatureLevel_Undefined = 0,
    WGPUFeatureLevel_Compatibility = 1,
    WGPUFeatureLevel_Core = 2,
    WGPUFeatureLevel_Force32 = 0x7FFFFFFF
} WGPUFeatureLevel;

typedef enum WGPUPowerPreference {
    WGPUPowerPreference_Undefined = 0,
    WGPUPowerPreference_LowPower = 1,
    WGPUPowerPreference_HighPerformance = 2,
    WGPUPowerPreference_Force32 = 0x7FFFFFFF
} WGPUPowerPreference;

// Values of THIS build; dawn_loader.c asks the build for each one's name.
typedef enum WGPUFeatureName {
    WGPUFeatureName_TimestampQuery = 0x09,
    WGPUFeatureName_ShaderF16 = 0x0B,
    WGPUFeatureName_Subgroups = 0x12,
    WGPUFeatureName_SubgroupSizeControl = 0x17,
    WGPUFeatureName_ChromiumExperimentalSubgroupMatrix = 0x00050034,  // needs allow_unsafe_apis
    WGPUFeatureName_Force32 = 0x7FFFFFFF
} WGPUFeatureName;

typedef enum WGPUSubgroupMatrixComponentType {
    WGPUSubgroupMatrixComponentType_F32 = 1,
    WGPUSubgroupMatrixComponentType_F16 = 2,
    WGPUSubgroupMatrixComponentType_U32 = 3,
    WGPUSubgroupMatrixComponentType_I32 = 4,
    WGPUSubgroupMatrixComponentType_U8 = 5,
    WGPUSubgroupMatrixComponentType_I8 = 6,
    WGPUSubgroupMatrixComponentType_Force32 = 0x7FFFFFFF
} WGPUSubgroupMatrixComponentType;

typedef enum WGPURequestAdapterStatus {
    WGPURequestAdapterStatus_Success = 1,
    WGPURequestAdapterStatus_CallbackCancelled = 2,
    WGPURequestAdapterStatus_Unavailable = 3,
    WGPURequestAdapterStatus_Error = 4,
    WGPURequestAdapterStatus_Force32 = 0x7FFFFFFF
} WGPURequestAdapterStatus;

typedef enum WGPURequestDeviceStatus {
    WGPURequestDeviceStatus_Success = 1,
    WGPURequestDeviceStatus_CallbackCancelled = 2,
    WGPURequestDeviceStatus_Error = 3,
    WGPURequestDeviceStatus_Force32 = 0x7FFFFFFF
} WGPURequestDeviceStatus;

typedef enum WGPUMapAsyncStatus {
    WGPUMapAsyncStatus_Success = 1,
    WGPUMapAsyncStatus_CallbackCancelled = 2,
    WGPUMapAsyncStatus_Error = 3,
    WGPUMapAsyncStatus_Aborted = 4,
    WGPUMapAsyncStatus_Force32 = 0x7FFFFFFF
} WGPUMapAsyncStatus;

typedef enum WGPUPopErrorScopeStatus {
    WGPUPopErrorScopeStatus_Success = 1,
    WGPUPopErrorScopeStatus_CallbackCancelled = 2,
    WGPUPopErrorScopeStatus_Error = 3,
    WGPUPopErrorScopeStatus_Force32 = 0x7FFFFFFF
} WGPUPopErrorScopeStatus;

typedef enum WGPUCompilationInfoRequestStatus {
    WGPUCompilationInfoRequestStatus_Success = 1,
    WGPUCompilationInfoRequestStatus_CallbackCancelled = 2,
    WGPUCompilationInfoRequestStatus_Force32 = 0x7FFFFFFF
} WGPUCompilationInfoRequestStatus;

typedef enum WGPUCompilationMessageType {
    WGPUCompilationMessageType_Error = 1,
    WGPUCompilationMessageType_Warning = 2,
    WGPUCompilationMessageType_Info = 3,
    WGPUCompilationMessageType_Force32 = 0x7FFFFFFF
} WGPUCompilationMessageType;

typedef enum WGPUErrorType {
    WGPUErrorType_NoError = 1,
    WGPUErrorType_Validation = 2,
    WGPUErrorType_OutOfMemory = 3,
    WGPUErrorType_Internal = 4,
    WGPUErrorType_Unknown = 5,
    WGPUErrorType_Force32 = 0x7FFFFFFF
} WGPUErrorType;

typedef enum WGPUErrorFilter {
    WGPUErrorFilter_Validation = 1,
    WGPUErrorFilter_OutOfMemory = 2,
    WGPUErrorFilter_Internal = 3,
    WGPUErrorFilter_Force32 = 0x7FFFFFFF
} WGPUErrorFilter;

typedef enum WGPUDeviceLostReason {
    WGPUDeviceLostReason_Unknown = 1,
    WGPUDeviceLostReason_Destroyed = 2,
    WGPUDeviceLostReason_CallbackCancelled = 3,
    WGPUDeviceLostReason_FailedCreation = 4,
    WGPUDeviceLostReason_Force32 = 0x7FFFFFFF
} WGPUDeviceLostReason;

typedef enum WGPUQueryType {
    WGPUQueryType_Occlusion = 1,
    WGPUQueryType_Timestamp = 2,
    WGPUQueryType_Force32 = 0x7FFFFFFF
} WGPUQueryType;

typedef WGPUFlags WGPUBufferUsage;
#define WGPUBufferUsage_MapRead ((WGPUBufferUsage)0x0001)
#define WGPUBufferUsage_MapWrite ((WGPUBufferUsage)0x0002)
#define WGPUBufferUsage_CopySrc ((WGPUBufferUsage)0x0004)
#define WGPUBufferUsage_CopyDst ((WGPUBufferUsage)0x0008)
#define WGPUBufferUsage_Uniform ((WGPUBufferUsage)0x0040)
#define WGPUBufferUsage_Storage ((WGPUBufferUsage)0x0080)
#define WGPUBufferUsage_QueryResolve ((WGPUBufferUsage)0x0200)

typedef WGPUFlags WGPUMapMode;
#define WGPUMapMode_Read ((WGPUMapMode)0x0001)

// --- callbacks --------------------------------------------------------------
typedef void (*WGPURequestAdapterCallback)(WGPURequestAdapterStatus status, WGPUAdapter adapter,
                                           WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPURequestDeviceCallback)(WGPURequestDeviceStatus status, WGPUDevice device,
                                          WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUDeviceLostCallback)(WGPUDevice const *device, WGPUDeviceLostReason reason,
                                       WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUUncapturedErrorCallback)(WGPUDevice const *device, WGPUErrorType type,
                                            WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUBufferMapCallback)(WGPUMapAsyncStatus status, WGPUStringView message,
                                      void *userdata1, void *userdata2);
typedef void (*WGPUPopErrorScopeCallback)(WGPUPopErrorScopeStatus status, WGPUErrorType type,
                                          WGPUStringView message, void *userdata1, void *userdata2);
struct WGPUCompilationInfo;
typedef void (*WGPUCompilationInfoCallback)(WGPUCompilationInfoRequestStatus status,
                                            struct WGPUCompilationInfo const *info,
                                            void *userdata1, void *userdata2);

#define WGPT_DAWN_CALLBACK_INFO(Name, Fn) \
    typedef struct Name {                 \
        WGPUChainedStruct *nextInChain;   \
        WGPUCallbackMode mode;            \
        Fn callback;                      \
        void *userdata1;                  \
        void *userdata2;                  \
    } Name
WGPT_DAWN_CALLBACK_INFO(WGPURequestAdapterCallbackInfo, WGPURequestAdapterCallback);
WGPT_DAWN_CALLBACK_INFO(WGPURequestDeviceCallbackInfo, WGPURequestDeviceCallback);
WGPT_DAWN_CALLBACK_INFO(WGPUDeviceLostCallbackInfo, WGPUDeviceLostCallback);
WGPT_DAWN_CALLBACK_INFO(WGPUBufferMapCallbackInfo, WGPUBufferMapCallback);
WGPT_DAWN_CALLBACK_INFO(WGPUPopErrorScopeCallbackInfo, WGPUPopErrorScopeCallback);
WGPT_DAWN_CALLBACK_INFO(WGPUCompilationInfoCallbackInfo, WGPUCompilationInfoCallback);
#undef WGPT_DAWN_CALLBACK_INFO

typedef struct WGPUUncapturedErrorCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUUncapturedErrorCallback callback;
    void *userdata1;
    void *userdata2;
} WGPUUncapturedErrorCallbackInfo;

// --- descriptors ------------------------------------------------------------
typedef struct WGPURequestAdapterOptions {
    WGPUChainedStruct *nextInChain;
    WGPUFeatureLevel featureLevel;
    WGPUPowerPreference powerPreference;
    WGPUBool forceFallbackAdapter;
    WGPUBackendType backendType;
    WGPUSurface compatibleSurface;
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
    WGPUChainedStruct *nextInChain;
    WGPUStringView vendor;
    WGPUStringView architecture;
    WGPUStringView device;
    WGPUStringView description;
    WGPUBackendType backendType;
    WGPUAdapterType adapterType;
    uint32_t vendorID;
    uint32_t deviceID;
    uint32_t subgroupMinSize;
    uint32_t subgroupMaxSize;
} WGPUAdapterInfo;

typedef struct WGPULimits {
    WGPUChainedStruct *nextInChain;
    uint32_t maxTextureDimension1D;
    uint32_t maxTextureDimension2D;
    uint32_t maxTextureDimension3D;
    uint32_t maxTextureArrayLayers;
    uint32_t maxBindGroups;
    uint32_t maxBindGroupsPlusVertexBuffers;
    uint32_t maxBindingsPerBindGroup;
    uint32_t maxDynamicUniformBuffersPerPipelineLayout;
    uint32_t maxDynamicStorageBuffersPerPipelineLayout;
    uint32_t maxSampledTexturesPerShaderStage;
    uint32_t maxSamplersPerShaderStage;
    uint32_t maxStorageBuffersPerShaderStage;
    uint32_t maxStorageTexturesPerShaderStage;
    uint32_t maxUniformBuffersPerShaderStage;
    uint64_t maxUniformBufferBindingSize;
    uint64_t maxStorageBufferBindingSize;
    uint32_t minUniformBufferOffsetAlignment;
    uint32_t minStorageBufferOffsetAlignment;
    uint32_t maxVertexBuffers;
    uint64_t maxBufferSize;
    uint32_t maxVertexAttributes;
    uint32_t maxVertexBufferArrayStride;
    uint32_t maxInterStageShaderVariables;
    uint32_t maxColorAttachments;
    uint32_t maxColorAttachmentBytesPerSample;
    uint32_t maxComputeWorkgroupStorageSize;
    uint32_t maxComputeInvocationsPerWorkgroup;
    uint32_t maxComputeWorkgroupSizeX;
    uint32_t maxComputeWorkgroupSizeY;
    uint32_t maxComputeWorkgroupSizeZ;
    uint32_t maxComputeWorkgroupsPerDimension;
    uint32_t maxImmediateSize;
} WGPULimits;  // 152 bytes in this build (dawn_loader.c checks what Dawn writes)

// 28 bytes a config in this build: newer than the 2026-08 dawn.json (which has
// 20), read off the Vulkan backend's code that fills the array (stride 0x1c).
// wgpt_gpu_open checks every entry is plausible before trusting the array.
typedef struct WGPUSubgroupMatrixConfig {
    WGPUSubgroupMatrixComponentType componentType;
    WGPUSubgroupMatrixComponentType resultComponentType;
    uint32_t M;
    uint32_t N;
    uint32_t K;
    uint32_t subgroupMinSize;  // the subgroup sizes the config works with
    uint32_t subgroupMaxSize;
} WGPUSubgroupMatrixConfig;

// Chained on WGPUAdapterInfo; Dawn allocates configs, FreeMembers releases them.
typedef struct WGPUAdapterPropertiesSubgroupMatrixConfigs {
    WGPUChainedStruct chain;
    size_t configCount;
    WGPUSubgroupMatrixConfig const *configs;
} WGPUAdapterPropertiesSubgroupMatrixConfigs;

typedef struct WGPUInstanceDescriptor {
    WGPUChainedStruct *nextInChain;
    size_t requiredFeatureCount;
    void const *requiredFeatures;  // WGPUInstanceFeatureName: wgpt asks for none
    void const *requiredLimits;
} WGPUInstanceDescriptor;

typedef struct WGPUDawnTogglesDescriptor {
    WGPUChainedStruct chain;
    size_t enabledToggleCount;
    const char *const *enabledToggles;
    size_t disabledToggleCount;
    const char *const *disabledToggles;
} WGPUDawnTogglesDescriptor;

// Dawn's blob cache (compiled shaders, VkPipelineCache data), chained on the
// device descriptor. The callback-info form (not the older loadDataFunction /
// storeDataFunction pointers): this build's symbols name
// CallbackHelper<WGPUDawnLoadCacheDataCallbackInfo, ..., size_t (*)(size_t,
// const uint8_t *, size_t, uint8_t *, void *, void *)> and the store twin
// returning void; tests/test_gpu_cache.c sees Dawn call both through this layout.
// load: called with value NULL / valueSize 0 for the size (0: a miss), then
// with a buffer of that size; returns the bytes written.
typedef size_t (*WGPUDawnLoadCacheDataCallback)(size_t keySize, const uint8_t *key, size_t valueSize, uint8_t *value,
                                                void *userdata1, void *userdata2);
typedef void (*WGPUDawnStoreCacheDataCallback)(size_t keySize, const uint8_t *key, size_t valueSize,
                                               const uint8_t *value, void *userdata1, void *userdata2);
typedef struct WGPUDawnLoadCacheDataCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUDawnLoadCacheDataCallback callback;
    void *userdata1;
    void *userdata2;
} WGPUDawnLoadCacheDataCallbackInfo;
typedef struct WGPUDawnStoreCacheDataCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUDawnStoreCacheDataCallback callback;
    void *userdata1;
    void *userdata2;
} WGPUDawnStoreCacheDataCallbackInfo;
typedef struct WGPUDawnCacheDeviceDescriptor {
    WGPUChainedStruct chain;
    WGPUStringView isolationKey;
    WGPUDawnLoadCacheDataCallbackInfo loadDataCallbackInfo;
    WGPUDawnStoreCacheDataCallbackInfo storeDataCallbackInfo;
} WGPUDawnCacheDeviceDescriptor;

typedef struct WGPUQueueDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
} WGPUQueueDescriptor;

typedef struct WGPUDeviceDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    size_t requiredFeatureCount;
    WGPUFeatureName const *requiredFeatures;
    WGPULimits const *requiredLimits;
    WGPUQueueDescriptor defaultQueue;
    WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
    WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUBufferDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUBufferUsage usage;
    uint64_t size;
    WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUShaderModuleDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
} WGPUShaderModuleDescriptor;

typedef struct WGPUShaderSourceWGSL {
    WGPUChainedStruct chain;
    WGPUStringView code;
} WGPUShaderSourceWGSL;

typedef struct WGPUCompilationMessage {
    WGPUChainedStruct *nextInChain;
    WGPUStringView message;
    WGPUCompilationMessageType type;
    uint64_t lineNum;
    uint64_t linePos;
    uint64_t offset;
    uint64_t length;
} WGPUCompilationMessage;

typedef struct WGPUCompilationInfo {
    WGPUChainedStruct *nextInChain;
    size_t messageCount;
    WGPUCompilationMessage const *messages;
} WGPUCompilationInfo;

typedef struct WGPUConstantEntry {
    WGPUChainedStruct *nextInChain;
    WGPUStringView key;
    double value;
} WGPUConstantEntry;

typedef struct WGPUComputeState {
    WGPUChainedStruct *nextInChain;
    WGPUShaderModule module;
    WGPUStringView entryPoint;
    size_t constantCount;
    WGPUConstantEntry const *constants;
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUPipelineLayout layout;  // NULL: layout "auto"
    WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

typedef struct WGPUBindGroupEntry {
    WGPUChainedStruct *nextInChain;
    uint32_t binding;
    WGPUBuffer buffer;
    uint64_t offset;
    uint64_t size;
    WGPUSampler sampler;
    WGPUTextureView textureView;
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUBindGroupLayout layout;
    size_t entryCount;
    WGPUBindGroupEntry const *entries;
} WGPUBindGroupDescriptor;

typedef struct WGPUCommandEncoderDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
} WGPUCommandEncoderDescriptor;

typedef struct WGPUCommandBufferDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
} WGPUCommandBufferDescriptor;

typedef struct WGPUPassTimestampWrites {
    WGPUChainedStruct *nextInChain;
    WGPUQuerySet querySet;
    uint32_t beginningOfPassWriteIndex;
    uint32_t endOfPassWriteIndex;
} WGPUPassTimestampWrites;

typedef struct WGPUComputePassDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUPassTimestampWrites const *timestampWrites;
} WGPUComputePassDescriptor;

typedef struct WGPUQuerySetDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUQueryType type;
    uint32_t count;
} WGPUQuerySetDescriptor;

// --- functions --------------------------------------------------------------
// X(return type, name, parameters): one line per C API function wgpt calls.
// dawn_loader.c defines a pointer of the same name for each and fills it, so
// call sites read as plain Dawn calls.
typedef void (*WGPUProc)(void);
#define WGPT_DAWN_FUNCTIONS(X) \
    X(WGPUProc, wgpuGetProcAddress, (WGPUStringView procName)) \
    X(WGPUInstance, wgpuCreateInstance, (WGPUInstanceDescriptor const *descriptor)) \
    X(void, wgpuInstanceRelease, (WGPUInstance instance)) \
    X(void, wgpuInstanceProcessEvents, (WGPUInstance instance)) \
    X(WGPUFuture, wgpuInstanceRequestAdapter, (WGPUInstance instance, WGPURequestAdapterOptions const *options, \
                                               WGPURequestAdapterCallbackInfo callbackInfo)) \
    X(WGPUStatus, wgpuAdapterGetInfo, (WGPUAdapter adapter, WGPUAdapterInfo *info)) \
    X(void, wgpuAdapterInfoFreeMembers, (WGPUAdapterInfo value)) \
    X(void, wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers, (WGPUAdapterPropertiesSubgroupMatrixConfigs value)) \
    X(WGPUStatus, wgpuAdapterGetLimits, (WGPUAdapter adapter, WGPULimits *limits)) \
    X(WGPUBool, wgpuAdapterHasFeature, (WGPUAdapter adapter, WGPUFeatureName feature)) \
    X(WGPUFuture, wgpuAdapterRequestDevice, (WGPUAdapter adapter, WGPUDeviceDescriptor const *descriptor, \
                                             WGPURequestDeviceCallbackInfo callbackInfo)) \
    X(void, wgpuAdapterRelease, (WGPUAdapter adapter)) \
    X(WGPUBool, wgpuDeviceHasFeature, (WGPUDevice device, WGPUFeatureName feature)) \
    X(WGPUStatus, wgpuDeviceGetLimits, (WGPUDevice device, WGPULimits *limits)) \
    X(WGPUQueue, wgpuDeviceGetQueue, (WGPUDevice device)) \
    X(WGPUBuffer, wgpuDeviceCreateBuffer, (WGPUDevice device, WGPUBufferDescriptor const *descriptor)) \
    X(WGPUShaderModule, wgpuDeviceCreateShaderModule, (WGPUDevice device, WGPUShaderModuleDescriptor const *descriptor)) \
    X(WGPUComputePipeline, wgpuDeviceCreateComputePipeline, (WGPUDevice device, \
                                                             WGPUComputePipelineDescriptor const *descriptor)) \
    X(WGPUBindGroup, wgpuDeviceCreateBindGroup, (WGPUDevice device, WGPUBindGroupDescriptor const *descriptor)) \
    X(WGPUCommandEncoder, wgpuDeviceCreateCommandEncoder, (WGPUDevice device, \
                                                           WGPUCommandEncoderDescriptor const *descriptor)) \
    X(WGPUQuerySet, wgpuDeviceCreateQuerySet, (WGPUDevice device, WGPUQuerySetDescriptor const *descriptor)) \
    X(void, wgpuDevicePushErrorScope, (WGPUDevice device, WGPUErrorFilter filter)) \
    X(WGPUFuture, wgpuDevicePopErrorScope, (WGPUDevice device, WGPUPopErrorScopeCallbackInfo callbackInfo)) \
    X(void, wgpuDeviceForceLoss, (WGPUDevice device, WGPUDeviceLostReason type, WGPUStringView message)) \
    X(void, wgpuDeviceDestroy, (WGPUDevice device)) \
    X(void, wgpuDeviceRelease, (WGPUDevice device)) \
    X(void, wgpuQueueWriteBuffer, (WGPUQueue queue, WGPUBuffer buffer, uint64_t bufferOffset, void const *data, \
                                   size_t size)) \
    X(void, wgpuQueueSubmit, (WGPUQueue queue, size_t commandCount, WGPUCommandBuffer const *commands)) \
    X(void, wgpuQueueRelease, (WGPUQueue queue)) \
    X(WGPUFuture, wgpuBufferMapAsync, (WGPUBuffer buffer, WGPUMapMode mode, size_t offset, size_t size, \
                                       WGPUBufferMapCallbackInfo callbackInfo)) \
    X(void const *, wgpuBufferGetConstMappedRange, (WGPUBuffer buffer, size_t offset, size_t size)) \
    X(void, wgpuBufferUnmap, (WGPUBuffer buffer)) \
    X(void, wgpuBufferDestroy, (WGPUBuffer buffer)) \
    X(void, wgpuBufferRelease, (WGPUBuffer buffer)) \
    X(WGPUFuture, wgpuShaderModuleGetCompilationInfo, (WGPUShaderModule shaderModule, \
                                                       WGPUCompilationInfoCallbackInfo callbackInfo)) \
    X(void, wgpuShaderModuleRelease, (WGPUShaderModule shaderModule)) \
    X(WGPUBindGroupLayout, wgpuComputePipelineGetBindGroupLayout, (WGPUComputePipeline pipeline, uint32_t groupIndex)) \
    X(void, wgpuComputePipelineRelease, (WGPUComputePipeline pipeline)) \
    X(void, wgpuBindGroupLayoutRelease, (WGPUBindGroupLayout layout)) \
    X(void, wgpuBindGroupRelease, (WGPUBindGroup bindGroup)) \
    X(WGPUComputePassEncoder, wgpuCommandEncoderBeginComputePass, (WGPUCommandEncoder encoder, \
                                                                   WGPUComputePassDescriptor const *descriptor)) \
    X(void, wgpuCommandEncoderClearBuffer, (WGPUCommandEncoder encoder, WGPUBuffer buffer, uint64_t offset, \
                                            uint64_t size)) \
    X(void, wgpuCommandEncoderCopyBufferToBuffer, (WGPUCommandEncoder encoder, WGPUBuffer source, \
                                                   uint64_t sourceOffset, WGPUBuffer destination, \
                                                   uint64_t destinationOffset, uint64_t size)) \
    X(void, wgpuCommandEncoderResolveQuerySet, (WGPUCommandEncoder encoder, WGPUQuerySet querySet, \
                                                uint32_t firstQuery, uint32_t queryCount, WGPUBuffer destination, \
                                                uint64_t destinationOffset)) \
    X(WGPUCommandBuffer, wgpuCommandEncoderFinish, (WGPUCommandEncoder encoder, \
                                                    WGPUCommandBufferDescriptor const *descriptor)) \
    X(void, wgpuCommandEncoderRelease, (WGPUCommandEncoder encoder)) \
    X(void, wgpuCommandBufferRelease, (WGPUCommandBuffer commandBuffer)) \
    X(void, wgpuComputePassEncoderSetPipeline, (WGPUComputePassEncoder pass, WGPUComputePipeline pipeline)) \
    X(void, wgpuComputePassEncoderSetBindGroup, (WGPUComputePassEncoder pass, uint32_t groupIndex, \
                                                 WGPUBindGroup group, size_t dynamicOffsetCount, \
                                                 uint32_t const *dynamicOffsets)) \
    X(void, wgpuComputePassEncoderDispatchWorkgroups, (WGPUComputePassEncoder pass, uint32_t x, uint32_t y, \
                                                       uint32_t z)) \
    X(void, wgpuComputePassEncoderEnd, (WGPUComputePassEncoder pass)) \
    X(void, wgpuComputePassEncoderRelease, (WGPUComputePassEncoder pass)) \
    X(void, wgpuQuerySetDestroy, (WGPUQuerySet querySet)) \
    X(void, wgpuQuerySetRelease, (WGPUQuerySet querySet))

#define WGPT_DAWN_DECLARE_(ret, name, params) extern ret(*name) params;
WGPT_DAWN_FUNCTIONS(WGPT_DAWN_DECLARE_)
#undef WGPT_DAWN_DECLARE_

#endif
